"""The one plain sentence that explains a decision, read first on the "Why this model" page.

Examples::

    coder-6b-b won by 0.04 on latency over coder-6b-a; v4-32k-a was ruled out by kv-cache 0.91 > 0.85
    since 10:02:03.

Pure: a :class:`schemas.trace.DecisionTrace` in, a ``str`` out.
"""

from __future__ import annotations

from app.explain import fmt_num, violation_short
from app.ui.data.flip import Margin, margin, smallest_flip
from schemas.common import RoutingMode
from schemas.trace import DecisionTrace

__all__ = ["decision_sentence", "flip_sentence", "ruled_out_clause"]

_MAX_LISTED = 3


def ruled_out_clause(trace: DecisionTrace) -> str:
    """``a was ruled out by kv-cache 0.91 > 0.85; b by ...`` for the rejected candidates ('' when none)."""
    rejected = [c for c in trace.candidates if not c.feasible]
    parts = []
    for i, cand in enumerate(rejected[:_MAX_LISTED]):
        hard = [v for v in cand.violations if v.severity == "hard"] or cand.violations
        why = ", ".join(violation_short(v) for v in hard) or "a constraint (no violation recorded)"
        parts.append(f"{cand.instance} was ruled out by {why}" if i == 0 else f"{cand.instance} by {why}")
    if len(rejected) > _MAX_LISTED:
        parts.append(f"{len(rejected) - _MAX_LISTED} more were ruled out")
    return "; ".join(parts)


def _win_clause(m: Margin) -> str:
    win, run = m.winner.instance, m.runner_up.instance
    if abs(m.margin) < 1e-9:
        return f"{win} won a tie-break over {run} (both scored {fmt_num(m.runner_up.total)})"
    on = f" on {m.deciding_term}" if m.deciding_term else ""
    return f"{win} won by {fmt_num(m.margin, 2)}{on} over {run}"


def _refused(trace: DecisionTrace) -> str:
    out = trace.outcome
    code = f" ({out.error_class})" if out.error_class else ""
    return (f"No candidate was considered for requested model {trace.features.requested_model!r}: "
            f"the request ended with HTTP {out.http_status}{code}")


def _no_feasible(trace: DecisionTrace) -> str:
    why = ruled_out_clause(trace)
    if trace.selected_instance and trace.mode == RoutingMode.FAIL_OPEN:
        return f"No instance was feasible, so {trace.selected_instance} was used anyway (fail open): {why}"
    if trace.selected_instance:
        return f"No instance was feasible, yet {trace.selected_instance} was selected: {why}"
    out = trace.outcome
    code = f" ({out.error_class})" if out.error_class else ""
    return f"No instance was feasible and the request failed with HTTP {out.http_status}{code}: {why}"


def _head(trace: DecisionTrace) -> str:
    m = margin(trace)
    feasible = [c for c in trace.candidates if c.feasible]
    sel = trace.selected_instance
    if m is None:
        only = feasible[0].instance if len(feasible) == 1 else sel
        return f"{only} was the only feasible candidate" if len(feasible) == 1 else f"{only} was selected"
    if sel is None or sel == m.winner.instance:
        head = _win_clause(m)
        return head if sel is not None else f"{head}, but no instance served the request"
    reason = f" ({trace.fallback_reason})" if trace.fallback_reason else ""
    return (f"{sel} served the request after a fallback{reason}; {_win_clause(m)} in the ranking")


def decision_sentence(trace: DecisionTrace) -> str:
    """One plain sentence: who won, by how much and on what, over whom, and who was ruled out and why."""
    if not trace.candidates:
        return _refused(trace) + "."
    if not any(c.feasible for c in trace.candidates):
        return _no_feasible(trace) + "."
    head = _head(trace)
    rest = ruled_out_clause(trace)
    return f"{head}; {rest}." if rest else f"{head}."


def flip_sentence(trace: DecisionTrace) -> str | None:
    """The smallest one-term change that would have tied the top two, in words; None without a runner-up."""
    m = margin(trace)
    if m is None:
        return None
    best = smallest_flip(trace)
    if best is None:
        return (f"No change of a single term within [0, 1] would have flipped {m.winner.instance} "
                f"over {m.runner_up.instance} (margin {fmt_num(m.margin)}).")
    if best.delta < 1e-9:
        return f"{m.winner.instance} and {m.runner_up.instance} tied: the smallest change to any term flips them."
    verb = "lowering" if best.side == "winner" else "raising"
    return (f"Margin {fmt_num(m.margin)} to {m.runner_up.instance}. {verb.capitalize()} {best.instance}'s "
            f"{best.term} from {fmt_num(best.raw)} to {fmt_num(best.new_raw)} (by {fmt_num(best.delta)}, "
            f"weight {fmt_num(best.weight)}) would have tied the totals: the smallest single-term change.")
