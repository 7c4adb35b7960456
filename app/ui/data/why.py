"""The one plain sentence that explains a decision, read first on the "Why this model" page.

Examples::

    coder-6b-b won by 0.04 on latency over coder-6b-a; v4-32k-a was ruled out by kv-cache 91% > 85%
    since 10:02:03.

    Rule code_tasks sent it to coder-6b: coder-6b-b won by 0.04 on latency over coder-6b-a.

Pure: a :class:`schemas.trace.DecisionTrace` in, a ``str`` out.
"""

from __future__ import annotations

from app.explain import after_pick, fmt_num, served_by, unserved_text, violation_short
from app.ui.data.flip import Flip, Margin, margin, smallest_flip, total_of
from app.ui.data.policy_step import fmt_waited
from app.ui.data.scores import is_sampled
from schemas.common import OutcomeStatus, RoutingMode
from schemas.trace import DecisionTrace

__all__ = ["decision_sentence", "flip_sentence", "ruled_out_clause"]

_MAX_LISTED = 3


def ruled_out_clause(trace: DecisionTrace) -> str:
    """``a was ruled out by kv-cache 91% > 85%; b by ...`` for the rejected candidates ('' when none)."""
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


def _throttled(trace: DecisionTrace) -> str | None:
    """A request its rule's throttle refused: nothing was considered or forwarded (None: not refused so)."""
    policy, out = trace.policy, trace.outcome
    if policy is None or policy.rule is None or policy.throttled != "reject":
        return None
    code = f" ({out.error_class})" if out.error_class else ""
    waited = ("" if policy.waited_s is None
              else f"waited {fmt_waited(policy.waited_s)} (its max_wait) for a token that did not come, then ")
    return (f"Rule {policy.rule} matched (target {policy.target or 'every model'}), but its throttle was empty: "
            f"the request {waited}was refused with HTTP {out.http_status}{code} and forwarded to no instance")


def _fallback(trace: DecisionTrace) -> str:
    return f" ({trace.fallback_reason})" if trace.fallback_reason else ""


def _no_feasible(trace: DecisionTrace) -> str:
    why = ruled_out_clause(trace)
    sel, served = trace.selected_instance, served_by(trace)
    if sel and trace.mode == RoutingMode.FAIL_OPEN:
        head = f"No instance was feasible, so {sel} was picked anyway (fail open)"
    elif sel:
        head = f"No instance was feasible, yet {sel} was selected"
    else:
        out = trace.outcome
        code = f" ({out.error_class})" if out.error_class else ""
        ended = "failed" if out.status is OutcomeStatus.ERROR else "was answered"
        head = f"No instance was feasible and the request {ended} with HTTP {out.http_status}{code}"
        notes = "; ".join(s.reason for s in after_pick(trace) if s.reason)
        return f"{head} ({notes}): {why}" if notes else f"{head}: {why}"
    if served is None:
        return f"{head}, but no instance served the request ({unserved_text(trace)}): {why}"
    if served != sel:
        return f"{head}; {served} served it after a fallback{_fallback(trace)}: {why}"
    return f"{head} and served it: {why}"


def _served(head: str, expected: str | None, trace: DecisionTrace, tail: str = "") -> str:
    """``head`` as it reads once the attempts are known: who served, if not ``expected``, and why none did."""
    served = served_by(trace)
    if served is not None and served == expected:
        return head
    if served is None:
        return f"{head}, but no instance served the request ({unserved_text(trace)})"
    return f"{served} served the request after a fallback{_fallback(trace)}; {head}{tail}"


def _head(trace: DecisionTrace) -> str:
    m = margin(trace)
    feasible = [c for c in trace.candidates if c.feasible]
    first = next((c.instance for c in trace.candidates if c.rank == 1), None)  # the picker's first (its draw)
    pick = first or trace.selected_instance
    if m is None:
        if len(feasible) == 1:
            return _served(f"{feasible[0].instance} was the only feasible candidate", feasible[0].instance, trace)
        return _served(f"{pick} was selected", pick, trace)
    if pick is not None and pick != m.winner.instance and is_sampled(trace):
        p = trace.selection_probability
        chance = f" with probability {fmt_num(p, 2)}" if p is not None else ""
        head = (f"{pick} was drawn by the sampling picker{chance}; {m.winner.instance} was the most likely "
                f"(scored {fmt_num(m.winner.total)})")
        return _served(head, pick, trace)
    return _served(_win_clause(m), m.winner.instance, trace, " in the ranking")


def _rule_clause(trace: DecisionTrace) -> str | None:
    """``Rule long_context sent it to deepseek-v4-32k``: the policy step that chose the candidates (None: no rule)."""
    policy = trace.policy
    if policy is None or policy.rule is None:
        return None
    target = policy.target or "every model"
    text = f"Rule {policy.rule} sent it to {target}"
    if policy.throttled == "chain":
        text = f"Rule {policy.rule} matched (target {target}) and its throttle sent it down its chain"
    elif policy.throttled == "wait":
        waited = "" if policy.waited_s is None else f" {fmt_waited(policy.waited_s)}"
        text = f"Rule {policy.rule} sent it to {target} once its throttle had a token (the request waited{waited})"
    if len(policy.chain_used) > 1:
        text += f" (tried {' -> '.join(policy.chain_used)})"
    return text


def decision_sentence(trace: DecisionTrace) -> str:
    """One plain sentence: the rule that chose the candidates; who won, by how much, on what, over whom; who was out."""
    if not trace.candidates:
        return (_throttled(trace) or _refused(trace)) + "."
    if not any(c.feasible for c in trace.candidates):
        sentence = _no_feasible(trace) + "."
    else:
        head = _head(trace)
        rest = ruled_out_clause(trace)
        sentence = f"{head}; {rest}." if rest else f"{head}."
    rule = _rule_clause(trace)
    if rule is None:
        return sentence
    return f"{rule}: {sentence[0].lower()}{sentence[1:]}" if sentence.startswith("No ") else f"{rule}: {sentence}"


def flip_sentence(trace: DecisionTrace) -> str | None:
    """The smallest single change that would have changed the winner, in words (:mod:`app.ui.data.flip`).

    None when there is nothing to flip (no runner-up, no removed candidate that could lead, no rule
    one atom away).
    """
    m = margin(trace)
    best = smallest_flip(trace)
    if best is None:
        if m is None:
            return None
        return (f"No single change (a score term within [0, 1], a constraint verdict, a rule atom) would have "
                f"flipped {m.winner.instance} over {m.runner_up.instance} (margin {fmt_num(m.margin)}).")
    won = "become the most likely draw" if best.likeliest else "won"
    if best.kind == "rule":
        now = f"instead of {trace.rule}" if trace.rule else "instead"
        return f"{_had(best)}, rule {best.term} would have matched {now}: the smallest single change."
    if best.kind == "feasibility":
        if best.side == "winner":
            return (f"Had {best.instance}'s {best.metric} been past {fmt_num(_num(best.new_raw))} (it was "
                    f"{fmt_num(_num(best.raw))}), {best.term} would have removed it and {best.new_winner} would have "
                    f"{won}: the smallest single change.")
        return (f"Had {best.instance}'s {best.metric} been within {fmt_num(_num(best.new_raw))} (it was "
                f"{fmt_num(_num(best.raw))}), {best.term} would have kept it and it would have {won} on its would-be "
                f"score: the smallest single change.")
    lead = m.winner.instance if m is not None else best.instance
    if best.delta < 1e-9:
        return f"{lead} and {best.new_winner} tied: the smallest change to any term flips them."
    other = best.new_winner if best.side == "challenger" else lead
    gap = abs(m.margin) if m is not None and best.side == "winner" else _gap(trace, lead, other)
    head = f"Margin {fmt_num(gap)} to {best.new_winner if best.side == 'winner' else lead}. "
    return head + _term_change(best, lead)


def _term_change(best: Flip, lead: str) -> str:
    """What moving one term to where the totals tie does: the tie-break decides there (sampling: equal chances)."""
    verb, past = ("Lowering", "below") if best.side == "winner" else ("Raising", "above")
    old, new = fmt_num(_num(best.raw)), fmt_num(_num(best.new_raw))
    change = f"{verb} {best.instance}'s {best.term} from {old} to"
    weight = f"weight {fmt_num(best.weight)}"
    smallest = "the smallest single change."
    if best.at_tie is not None and best.at_tie != lead:  # the tie itself changes the winner
        gone = best.new_winner if best.at_tie == best.new_winner else f"{best.at_tie}, tied with them"
        return (f"{change} {new} (by {fmt_num(best.delta)}, {weight}) would have tied the totals, and the tie-break "
                f"(mmh3 of request_id:instance) would have gone to {gone}: {smallest}")
    what = f"made {best.new_winner} the most likely draw" if best.likeliest else f"made {best.new_winner} win"
    at = ("the two would have been equally likely." if best.at_tie is None
          else f"the totals would have tied, and the tie-break (mmh3 of request_id:instance) would have kept {lead}.")
    return (f"{change} {past} {new} (by more than {fmt_num(best.delta)}, {weight}) would have {what}: {smallest} "
            f"At {new} {at}")


def _num(value: float | str | None) -> float | None:
    return value if isinstance(value, float | int) else None


def _had(best: Flip) -> str:
    return f"Had {best.metric} been {best.new_raw}" if best.metric != "the prompt" else f"Had the prompt {best.new_raw}"


def _gap(trace: DecisionTrace, lead: str, other: str) -> float:
    by = {c.instance: c for c in trace.candidates}
    return total_of(trace, by[lead]) - total_of(trace, by[other])
