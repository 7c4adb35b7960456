"""One decision trace as plain data for the UI: text summaries and pandas frames.

Pure functions, no Streamlit: the trace explorer page and the terminal tree both format
through here, so a violation or a number reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from schemas.fleet import InstanceSnapshot
from schemas.trace import CandidateEval, DecisionTrace, Violation

__all__ = [
    "ATTEMPT_COLUMNS",
    "CANDIDATE_BASE_COLUMNS",
    "GAUGE_COLUMNS",
    "STEP_COLUMNS",
    "attempts_frame",
    "candidates_frame",
    "features_summary",
    "fmt_num",
    "headline",
    "ordered_candidates",
    "outcome_text",
    "rejections",
    "score_columns",
    "steps_frame",
    "summary",
    "violation_text",
]

STEP_COLUMNS: tuple[str, ...] = (
    "seq",
    "step",
    "kind",
    "plugin",
    "value",
    "reason",
    "kept",
    "rejected",
    "duration_us",
)
CANDIDATE_BASE_COLUMNS: tuple[str, ...] = ("instance", "model", "zone", "verdict", "violations")
GAUGE_COLUMNS: tuple[str, ...] = (
    "queue",
    "running",
    "kv_cache_usage",
    "warmup_progress",
    "error_rate",
    "age_s",
    "stale",
)
ATTEMPT_COLUMNS: tuple[str, ...] = (
    "seq",
    "instance",
    "model",
    "status",
    "http_status",
    "error_class",
    "latency_ms",
)
_RANK_COLUMNS: tuple[str, ...] = ("total", "rank", "selected")
_DASH = "—"


def fmt_num(value: float | None, digits: int = 3) -> str:
    """Format a number compactly (``0.742``, ``14``, ``3000``); None becomes an em dash."""
    if value is None:
        return _DASH
    if abs(value) < 1:
        return f"{value:.{digits}g}"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def violation_text(violation: Violation) -> str:
    """Render a violation as ``constraint: metric value op threshold — reason``."""
    value = "no data" if violation.value is None else fmt_num(violation.value)
    text = f"{violation.constraint}: {violation.metric} {value} {violation.op} {fmt_num(violation.threshold)}"
    return f"{text} — {violation.reason}" if violation.reason else text


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


def summary(trace: DecisionTrace) -> dict[str, str]:
    """Return the headline facts of a trace as ordered ``label -> text`` pairs."""
    selected = (
        f"{trace.selected_model or '?'} → {trace.selected_instance or '?'}"
        if trace.selected_model or trace.selected_instance
        else "none"
    )
    if trace.fallback_triggered:
        fallback = f"yes — {trace.fallback_reason}" if trace.fallback_reason else "yes"
    else:
        fallback = "no"
    intent = trace.intent or _DASH
    if trace.intent and trace.intent_confidence is not None:
        intent = f"{trace.intent} ({trace.intent_confidence:.0%})"
    return {
        "request_id": trace.request_id,
        "ts": trace.ts.isoformat(),
        "selected": selected,
        "fallback": fallback,
        "mode": trace.mode.value,
        "decision_latency": f"{fmt_num(trace.latency_ms, 2)} ms",
        "outcome": outcome_text(trace),
        "rule": trace.rule or _DASH,
        "intent": intent,
        "experiment_arm": trace.experiment_arm or _DASH,
        "router_version": trace.router_version,
        "policy_hash": trace.policy_hash,
        "query_hash": trace.query_hash,
        "schema_version": str(trace.schema_version),
    }


def headline(trace: DecisionTrace) -> dict[str, str]:
    """Return the few short facts an operator reads first, as ``label -> value`` for metric tiles."""
    out = trace.outcome
    return {
        "Fallback": "yes" if trace.fallback_triggered else "no",
        "Mode": trace.mode.value,
        "Decision latency": f"{fmt_num(trace.latency_ms, 2)} ms",
        "Outcome": f"{out.status.value} · HTTP {out.http_status}",
        "Total time": f"{fmt_num(out.total_ms, 1)} ms",
    }


def rejections(trace: DecisionTrace) -> dict[str, str]:
    """Map each rejected candidate's instance to its violations as readable text."""
    return {
        c.instance: "; ".join(violation_text(v) for v in c.violations) or "rejected (no violation recorded)"
        for c in ordered_candidates(trace.candidates)
        if not c.feasible
    }


def features_summary(trace: DecisionTrace) -> dict[str, str]:
    """Return the analysed request features as ``name -> text`` pairs."""
    return {name: _to_text(value) for name, value in trace.features.model_dump(mode="json").items()}


def steps_frame(trace: DecisionTrace) -> pd.DataFrame:
    """One row per decision step, in execution order."""
    rows = [
        {
            "seq": s.seq,
            "step": s.step,
            "kind": s.kind.value,
            "plugin": s.plugin,
            "value": s.value,
            "reason": s.reason,
            "kept": ", ".join(s.instances),
            "rejected": ", ".join(s.rejected),
            "duration_us": s.duration_us,
        }
        for s in sorted(trace.decision_trace, key=lambda s: s.seq)
    ]
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS))


def score_columns(trace: DecisionTrace) -> list[str]:
    """Score term names in weight order, the term columns of :func:`candidates_frame`."""
    return [w.name for w in trace.score_weights]


def candidates_frame(trace: DecisionTrace) -> pd.DataFrame:
    """One row per candidate, best first, with verdict, violations, weighted terms and gauges.

    Each score term gets its own column holding the weighted value; a term name that clashes
    with a fixed column is prefixed ``score:``.
    """
    cands = ordered_candidates(trace.candidates)
    fixed = set(CANDIDATE_BASE_COLUMNS) | set(_RANK_COLUMNS) | set(GAUGE_COLUMNS)
    terms = {name: f"score:{name}" if name in fixed else name for name in score_columns(trace)}
    columns = [*CANDIDATE_BASE_COLUMNS, *terms.values(), *_RANK_COLUMNS, *GAUGE_COLUMNS]
    rows = []
    for cand in cands:
        row: dict[str, object] = {
            "instance": cand.instance,
            "model": cand.model,
            "zone": cand.zone,
            "verdict": "feasible" if cand.feasible else "rejected",
            "violations": "; ".join(violation_text(v) for v in cand.violations),
            "total": cand.total,
            "rank": cand.rank,
            "selected": cand.instance == trace.selected_instance,
        }
        row.update(dict.fromkeys(terms.values()))
        row.update({terms[name]: weighted for name, _, _, weighted in trace.terms_of(cand)})
        row.update(_gauges(cand.state))
        rows.append(row)
    frame = pd.DataFrame(rows, columns=columns)
    frame["rank"] = frame["rank"].astype("Int64")
    for col in [*terms.values(), "total"]:
        frame[col] = frame[col].astype("float64")
    return frame


def attempts_frame(trace: DecisionTrace) -> pd.DataFrame:
    """One row per forwarding attempt, in order."""
    rows = [
        {
            "seq": a.seq,
            "instance": a.instance,
            "model": a.model,
            "status": a.status.value,
            "http_status": a.http_status,
            "error_class": a.error_class,
            "latency_ms": a.latency_ms,
        }
        for a in sorted(trace.attempts, key=lambda a: a.seq)
    ]
    frame = pd.DataFrame(rows, columns=list(ATTEMPT_COLUMNS))
    frame["http_status"] = frame["http_status"].astype("Int64")
    return frame


def _gauges(state: InstanceSnapshot | None) -> dict[str, object]:
    if state is None:
        return dict.fromkeys(GAUGE_COLUMNS)
    return {name: getattr(state, name) for name in GAUGE_COLUMNS}


def _to_text(value: object) -> str:
    if value is None:
        return _DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
