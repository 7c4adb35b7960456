"""How a decision trace reads as text, the same in the terminal tree and on the page.

Pure functions over :mod:`schemas` models returning ``str`` (no rich, pandas or Streamlit):
:mod:`app.cli.trace_tree` and :mod:`app.ui.data.trace_tables` both format through here, so a
violation or a number reads the same everywhere. A violation reads as :mod:`app.violation_text`
writes it (``kv_cache_usage 93% > 85%``); its three functions are re-exported here.

Who served is the instance of the attempt that answered (:func:`served_by`), never merely the one
selected; when none did, :func:`unserved_text` says why. A rule's chain listed after the scored
candidates is :data:`CHAIN_ONLY` (:func:`unjudged`), not feasible.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC

from app.violation_text import breach_op, violation_short, violation_text
from schemas.common import AttemptStatus, OutcomeStatus, RoutingMode, StepKind
from schemas.feedback import Feedback
from schemas.trace import CandidateEval, DecisionStep, DecisionTrace

__all__ = [
    "CHAIN_ONLY",
    "DASH",
    "after_pick",
    "breach_op",
    "features_summary",
    "fmt_num",
    "fmt_pct",
    "ordered_candidates",
    "outcome_text",
    "selection_text",
    "served_by",
    "to_text",
    "unjudged",
    "unserved_text",
    "verdict_text",
    "violation_short",
    "violation_text",
]

DASH = "—"
CHAIN_ONLY = "not filtered or scored (rule's chain)"
"""A candidate a rule's chain kept for attempts that fail, never filtered or scored (:func:`unjudged`)."""
_NOT_AN_INSTANCE = (RoutingMode.RULES, RoutingMode.CACHE)  # answered by a degraded target or the answer cache


def fmt_num(value: float | None, digits: int = 3) -> str:
    """Format a number compactly (``0.742``, ``14``, ``3,000``); None becomes an em dash."""
    if value is None:
        return DASH
    if abs(value) < 1:
        return f"{value:.{digits}g}"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_pct(value: float | None) -> str:
    """Format a share in [0, 1] as a whole percentage (``97%``); None becomes an em dash."""
    return DASH if value is None else f"{value:.0%}"


def to_text(value: object) -> str:
    """Render a plain value: None as an em dash, booleans as ``yes``/``no``, anything else by ``str``."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def ordered_candidates(candidates: Iterable[CandidateEval]) -> list[CandidateEval]:
    """Sort candidates best first: ranked by rank, then unranked feasible, then rejected."""

    def key(c: CandidateEval) -> tuple[bool, bool, int, str]:
        return (not c.feasible, c.rank is None, c.rank or 0, c.instance)

    return sorted(candidates, key=key)


def outcome_text(trace: DecisionTrace) -> str:
    """Summarise the outcome in one line, e.g. ``ok · HTTP 200 · 3,890 ms``."""
    out = trace.outcome
    status = f"{out.status.value} ({out.error_class})" if out.error_class else out.status.value
    return f"{status} · HTTP {out.http_status} · {fmt_num(out.total_ms, 1)} ms"


def selection_text(trace: DecisionTrace) -> str | None:
    """Return ``model → instance`` (``?`` for a missing half), or None when nothing was selected."""
    if not (trace.selected_model or trace.selected_instance):
        return None
    return f"{trace.selected_model or '?'} → {trace.selected_instance or '?'}"


_NOT_RECORDED = "not recorded"


def features_summary(trace: DecisionTrace) -> dict[str, str]:
    """Return the analysed request features as ``name -> text`` pairs.

    A list the trace does not hold (stored before the field existed: ``file_types`` of an older
    trace) reads ``not recorded``, not as the empty list its default would show ("none").
    """
    feats = trace.features
    return {name: _NOT_RECORDED if isinstance(value, list) and not value and name not in feats.model_fields_set
            else to_text(value) for name, value in feats.model_dump(mode="json").items()}


def served_by(trace: DecisionTrace) -> str | None:
    """The instance that served the request: the (last) ``ok`` attempt's, never merely the one selected.

    A trace that records no attempt at all (an imported one) and ended ``ok`` is taken as served by
    its selected instance (unless a degraded target or the answer cache answered); one with attempts
    none of which answered, or that ended in an error, by none.
    """
    ok = [a for a in trace.attempts if a.status is AttemptStatus.OK]
    if ok:
        return max(ok, key=lambda a: a.seq).instance
    if not trace.attempts and trace.outcome.status is OutcomeStatus.OK and trace.mode not in _NOT_AN_INSTANCE:
        return trace.selected_instance
    return None


def after_pick(trace: DecisionTrace) -> list[DecisionStep]:
    """The fallback and attempt steps recorded after the pick that the attempts do not already say.

    What happened on the way to the instances: those skipped (a breaker that refused them), a
    degraded target that answered. Retries onto an attempted instance and each attempt's own
    step are left out (the attempts list them).
    """
    steps = sorted(trace.decision_trace, key=lambda s: s.seq)
    pick = max((s.seq for s in steps if s.kind is StepKind.PICK), default=-1)
    tried = {a.instance for a in trace.attempts}
    out = []
    for s in steps:
        if s.seq <= pick or s.kind not in (StepKind.FALLBACK, StepKind.ATTEMPT):
            continue
        if s.kind is StepKind.ATTEMPT and set(s.instances) <= tried:
            continue
        if s.kind is StepKind.FALLBACK and s.step == "fallback" and s.instances and set(s.instances) <= tried:
            continue  # the retry onto an instance attempted
        out.append(s)
    return out


def _step_note(step: DecisionStep) -> str:
    text = step.reason or step.step
    missing = [i for i in step.instances if i not in text]
    return f"{text} ({', '.join(missing)})" if missing else text


def unserved_text(trace: DecisionTrace) -> str:
    """Why no instance served: ``HTTP 502 all_attempts_failed; no attempt was made; big-b not sent: ...``.

    The outcome, then each attempt with its status (or that none was made), then what the steps
    after the pick recorded (:func:`after_pick`), whatever their shape.
    """
    out = trace.outcome
    parts = [f"HTTP {out.http_status}" + (f" {out.error_class}" if out.error_class else "")]
    if trace.attempts:
        tried = [f"{a.instance} {a.status.value}" + (f" {a.error_class}" if a.error_class else "")
                 + (f" HTTP {a.http_status}" if a.http_status is not None else "")
                 for a in sorted(trace.attempts, key=lambda a: a.seq)]
        parts.append("attempts: " + ", ".join(tried))
    else:
        parts.append("no attempt was made")
    parts += [_step_note(s) for s in after_pick(trace)]
    return "; ".join(parts)


def unjudged(trace: DecisionTrace) -> list[str]:
    """The candidates a matched rule kept for its chain without a recorded filter or score, in trace order.

    Feasible, without a total, a violation or a filter step that rejected them, in a decision that
    scored others: the models of the rule's chain after the level that was scored, listed (and
    ranked after the scored ones) for attempts that fail, never filtered or scored in the trace.
    """
    step = trace.policy
    if step is None or step.rule is None or trace.mode is RoutingMode.FAIL_OPEN:
        return []
    if not any(c.total is not None for c in trace.candidates):
        return []
    rejected = {i for s in trace.decision_trace if s.kind is StepKind.FILTER for i in s.rejected}
    return [c.instance for c in trace.candidates
            if c.feasible and c.total is None and not c.violations and c.instance not in rejected]


def verdict_text(feedback: Feedback) -> str:
    """A verdict: ``wrong: should have gone to coder-6b (class code) · from client · 2026-11-29 12:00:05 UTC``."""
    verdict = "correct" if feedback.correct else "wrong"
    if feedback.expected_model:
        verdict += f": should have gone to {feedback.expected_model}"
    if feedback.expected_class:
        verdict += f" (class {feedback.expected_class})"
    when = feedback.ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{verdict} · from {feedback.source} · {when}"
