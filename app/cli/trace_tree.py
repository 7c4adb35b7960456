"""One decision trace as a rich tree, for ``routelens trace ID`` in the terminal.

Every value taken from the trace goes in as :class:`rich.text.Text`, never as console markup,
so an instance id or a reason containing ``[brackets]`` prints verbatim.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.text import Text
from rich.tree import Tree

from app.explain import (
    CHAIN_ONLY,
    DASH,
    features_summary,
    fmt_num,
    fmt_pct,
    ordered_candidates,
    outcome_text,
    selection_text,
    served_by,
    unjudged,
    unserved_text,
    verdict_text,
    violation_text,
)
from app.ui.data import policy_step
from app.ui.data.fleet import NOT_SCRAPED
from app.ui.data.trace_tables import ts_text
from app.units import fmt
from schemas.feedback import Feedback
from schemas.fleet import EXTERNAL, InstanceSnapshot
from schemas.trace import Attempt, CandidateEval, DecisionStep, DecisionTrace
from schemas.trace_policy import PolicyStep

__all__ = ["render_trace"]

_OK = "green"
_BAD = "bold red"
_DIM = "dim"


def render_trace(trace: DecisionTrace, feedback: Sequence[Feedback] | str | None = None,
                 candidates: int | None = None) -> Tree:
    """Build a readable tree of one trace: header, features, routing rule, steps, candidates, selection, outcome.

    Args:
        trace: The decision trace to show.
        feedback: The verdicts recorded on the request (shown last), or why they could not be
            read; None: not asked.
        candidates: Candidates shown in full at most, best first (those tried or served always);
            the others are counted by verdict in one line. None: every one.

    Returns:
        A :class:`rich.tree.Tree`; print it with ``rich.console.Console().print(tree)``.
    """
    tree = Tree(_header(trace), guide_style=_DIM)
    features = tree.add(Text("Request features", style="bold"))
    for name, value in features_summary(trace).items():
        features.add(_pair(name, value))
    if trace.rule or trace.intent:
        intent = f"{trace.intent} ({fmt_num(trace.intent_confidence)})" if trace.intent else DASH
        features.add(Text.assemble(("rule ", _DIM), trace.rule or DASH, ("  intent ", _DIM), intent))
    if trace.policy is not None:
        _add_policy(tree, trace.policy)

    steps = tree.add(Text(f"Steps ({len(trace.decision_trace)})", style="bold"))
    for step in sorted(trace.decision_trace, key=lambda s: s.seq):
        steps.add(_step(step))

    cands = tree.add(Text(f"Candidates ({len(trace.candidates)})", style="bold"))
    served, aside = served_by(trace), unjudged(trace)
    ordered = ordered_candidates(trace.candidates)
    shown, rest = _shown(trace, ordered, served, candidates)
    for cand in shown:
        _add_candidate(cands, trace, cand, served, chain_only=cand.instance in aside)
    if rest:
        cands.add(_rest_line(rest, aside))

    _add_selection(tree, trace, served)
    attempts = tree.add(Text(f"Attempts ({len(trace.attempts)})", style="bold"))
    for attempt in sorted(trace.attempts, key=lambda a: a.seq):
        attempts.add(_attempt(attempt))
    if not trace.attempts and served is None and trace.candidates:
        attempts.add(Text("none: the request was not forwarded (Selection says why)", style=_BAD))
    _add_outcome(tree, trace)
    if feedback is not None:
        _add_feedback(tree, feedback)
    return tree


def _shown(trace: DecisionTrace, ordered: list[CandidateEval], served: str | None,
           limit: int | None) -> tuple[list[CandidateEval], list[CandidateEval]]:
    """The candidates to show in full (the best ``limit``, and any tried, selected or served), and the rest."""
    if limit is None or len(ordered) <= limit:
        return ordered, []
    keep = {a.instance for a in trace.attempts} | {trace.selected_instance, served}
    shown = [c for i, c in enumerate(ordered) if i < limit or c.instance in keep]
    ids = {id(c) for c in shown}
    return shown, [c for c in ordered if id(c) not in ids]


def _rest_line(rest: list[CandidateEval], aside: Sequence[str] = ()) -> Text:
    """One line for the candidates not shown: how many were feasible, how many rejected and by what.

    A rule's chain kept for failed attempts (``aside``) is counted as such, as its candidates read
    when shown, not as feasible; a rejected candidate under the constraint that removed it (its
    first hard verdict: a soft one before it only lowered its score).
    """
    chain = [c for c in rest if c.instance in aside]
    judged = [c for c in rest if c.instance not in aside]
    feasible = sum(c.feasible for c in judged)
    why = Counter(next((v.constraint for v in c.violations if v.severity == "hard"),
                       c.violations[0].constraint if c.violations else None)
                  for c in judged if not c.feasible)
    parts = [f"{feasible} feasible"] if feasible else []
    if len(judged) > feasible:
        by = ", ".join(f"{metric} {n}" for metric, n in why.most_common() if metric is not None)
        parts.append(f"{len(judged) - feasible} rejected" + (f" ({by})" if by else ""))
    if chain:
        parts.append(f"{len(chain)} {CHAIN_ONLY}")
    return Text.assemble((f"… {len(rest)} more: ", _DIM), "; ".join(parts),
                         ("  (--candidates all to show every one)", _DIM))


def _add_policy(parent: Tree, step: PolicyStep) -> None:
    """The routing policy's record: the rule, each rule tried and why, the throttle, the chain, intent, files."""
    node = parent.add(Text("Routing rule", style="bold"))
    node.add(Text(policy_step.rule_sentence(step)))
    for row in policy_step.clauses_rows(step):
        matched = row["matched"] == "yes"
        node.add(Text.assemble(("tried ", _DIM), (row["rule"], "bold"),
                               ("  matched" if matched else "  no", _OK if matched else _DIM), f"  {row['why']}"))
    if (intent := policy_step.intent_sentence(step)) is not None:
        node.add(Text(intent))
    if step.keyword_score is not None:
        kw = node.add(Text.assemble(("keyword score ", _DIM), fmt_num(step.keyword_score)))
        for k in step.keywords:
            kw.add(Text.assemble((k.pattern, "bold"), f"  weight {fmt_num(k.weight)}"))
    for a in policy_step.attachments_rows(step):
        mismatch = ("  bytes are not the declared type", _BAD) if a["mismatch"] else ""
        node.add(Text.assemble(("attachment ", _DIM), a["where"], f"  declared {a['declared']}",
                               f"  detected {a['detected']}  {a['bytes']} bytes", mismatch))


def _add_feedback(parent: Tree, feedback: Sequence[Feedback] | str) -> None:
    if isinstance(feedback, str):
        parent.add(Text.assemble(("Feedback ", "bold"), (f"could not be read: {feedback}", _DIM)))
        return
    if not feedback:
        parent.add(Text.assemble(("Feedback ", "bold"), ("none recorded", _DIM)))
        return
    node = parent.add(Text(f"Feedback ({len(feedback)})", style="bold"))
    for fb in feedback:
        node.add(Text(verdict_text(fb), style=_OK if fb.correct else _BAD))


def _header(trace: DecisionTrace) -> Text:
    text = Text.assemble(("Decision trace ", "bold"), (trace.request_id, "bold cyan"), "\n")
    parts = [
        ("ts", ts_text(trace.ts)),
        ("router", trace.router_version),
        ("policy", trace.policy_hash),
        ("mode", trace.mode.value),
        ("decision", f"{fmt_num(trace.latency_ms, 2)} ms"),
    ]
    if trace.experiment_arm:
        parts.append(("arm", trace.experiment_arm + (" (forced by header: left out of comparisons)"
                                                    if trace.arm_forced else "")))
    for i, (name, value) in enumerate(parts):
        text.append(("  " if i else "") + f"{name} ", style=_DIM)
        text.append(value, style="yellow" if name == "mode" and value != "normal" else "")
    text.append("\nquery ", style=_DIM)
    text.append(trace.query_hash)
    if trace.otel_trace_id:
        text.append("\ntrace id ", style=_DIM)
        text.append(trace.otel_trace_id)
        text.append(f"  span {trace.otel_span_id or '-'}", style=_DIM)
    return text


def _pair(name: str, value: str) -> Text:
    return Text.assemble((f"{name}: ", _DIM), value)


def _step(step: DecisionStep) -> Text:
    text = Text.assemble((f"#{step.seq} ", _DIM), (step.step, "bold"), (f" [{step.kind.value}]", _DIM))
    if step.plugin:
        text.append(f" {step.plugin}", style=_DIM)
    if step.value is not None:
        text.append(f" value={fmt_num(step.value)}")
    if step.reason:
        text.append(f" — {step.reason}")
    if step.instances:
        text.append("  kept: ", style=_DIM)
        text.append(", ".join(step.instances), style=_OK)
    if step.rejected:
        text.append("  rejected: ", style=_DIM)
        text.append(", ".join(step.rejected), style=_BAD)
    if step.duration_us is not None:
        text.append(f"  ({fmt_num(step.duration_us, 1)} µs)", style=_DIM)
    return text


def _add_candidate(parent: Tree, trace: DecisionTrace, cand: CandidateEval, served: str | None, *,
                   chain_only: bool) -> None:
    label = Text.assemble((cand.instance, "bold"), (f" ({cand.model}", _DIM))
    label.append(f", {cand.zone})" if cand.zone else ")", style=_DIM)
    if chain_only:
        label.append(f"  {CHAIN_ONLY}", style="yellow")
    else:
        label.append("  feasible" if cand.feasible else "  REJECTED", style=_OK if cand.feasible else _BAD)
    if cand.rank is not None:
        label.append(f"  rank {cand.rank}")
    if cand.total is not None:
        label.append(f"  total {cand.total:.3f}")
    if cand.instance == trace.selected_instance:
        label.append("  ← selected" if served is not None else "  ← selected, not served",
                     style="bold green" if served is not None else _BAD)
    elif cand.instance == served:
        label.append("  ← served", style="bold green")
    node = parent.add(label)
    for violation in cand.violations:
        node.add(Text.assemble(("violation ", _BAD), violation_text(violation)))
    if cand.state is not None:
        node.add(_gauges(cand.state))
    for name, raw, weight, weighted in trace.terms_of(cand):
        node.add(Text.assemble(("score ", _DIM), (name, "bold"), f" {raw:.3f}×{weight:.3f}={weighted:.3f}"))
    if cand.weight_factor < 1.0:
        node.add(Text.assemble(("soft-constraint ramp ", _DIM), f"×{cand.weight_factor:.2f}"))
    if cand.score_terms:
        total = DASH if cand.total is None else f"{cand.total:.3f}"
        rank = DASH if cand.rank is None else str(cand.rank)
        node.add(Text.assemble(("total ", _DIM), (total, "bold"), ("  rank ", _DIM), rank))


def _gauges(state: InstanceSnapshot) -> Text:
    pct = {"kv_cache_usage": "kv", "warmup_progress": "warmup", "error_rate": "err"}
    text = Text("state ", style=_DIM)
    for name in ("queue", "running"):
        text.append(f"{name} {fmt_num(getattr(state, name))}  ")
    for name, short in pct.items():
        text.append(f"{short} {fmt_pct(getattr(state, name))}  ")
    # to the tenth, as the trace page shows it: the age is the scrape round's own stamp within its tenth
    text.append(NOT_SCRAPED if state.age_s is None and state.engine == EXTERNAL else f"age {fmt(state.age_s, 's')}")
    if state.stale:
        text.append("  STALE", style=_BAD)
    if state.scrape_error:
        text.append(f"  scrape error: {state.scrape_error}", style=_BAD)
    return text


def _add_selection(parent: Tree, trace: DecisionTrace, served: str | None) -> None:
    node = parent.add(Text("Selection", style="bold"))
    selected = selection_text(trace)
    if selected:
        node.add(Text(selected, style="bold green" if served is not None else "bold"))
    else:
        node.add(Text("no instance selected", style=_BAD))
    if served is None:
        node.add(Text.assemble(("no instance served ", _BAD), unserved_text(trace)))
    elif served != trace.selected_instance:
        node.add(Text.assemble(("served by ", _DIM), (served, "bold green")))
    if trace.fallback_triggered:
        node.add(Text.assemble(("fallback ", "yellow"), trace.fallback_reason or "(no reason recorded)"))
    else:
        node.add(Text("fallback no", style=_DIM))


def _attempt(attempt: Attempt) -> Text:
    ok = attempt.status.value == "ok"
    text = Text.assemble(
        (f"#{attempt.seq} ", _DIM),
        (attempt.instance, "bold"),
        (f" ({attempt.model}) ", _DIM),
        (attempt.status.value, _OK if ok else _BAD),
    )
    if attempt.http_status is not None:
        text.append(f" HTTP {attempt.http_status}")
    if attempt.error_class and attempt.error_class != f"HTTP {attempt.http_status}":  # the status said it
        text.append(f" {attempt.error_class}", style=_BAD)
    text.append(f"  {fmt_num(attempt.latency_ms, 1)} ms", style=_DIM)
    return text


def _add_outcome(parent: Tree, trace: DecisionTrace) -> None:
    out = trace.outcome
    ok = out.status.value == "ok"
    node = parent.add(Text.assemble(("Outcome ", "bold"), (outcome_text(trace), _OK if ok else _BAD)))
    tokens = f"{fmt_num(out.prompt_tokens, 0)} in / {fmt_num(out.completion_tokens, 0)} out"
    node.add(_pair("tokens", tokens))
    node.add(_pair("cost", DASH if out.cost is None else f"{out.cost:.6g}"))
    node.add(_pair("ttft", DASH if out.ttft_ms is None else f"{fmt_num(out.ttft_ms, 1)} ms"))
    node.add(_pair("total", f"{fmt_num(out.total_ms, 1)} ms"))
