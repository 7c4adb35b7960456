"""The one line a decision diff opens with: what made decisions A and B differ.

Pure: two :class:`schemas.trace.DecisionTrace` in, a ``str`` out. The causes, in the order they
are looked for: another rule matched (and the atom that failed the other's rule), the instance A
chose was left out, removed, not drawn or outscored in B (or B's choice was so in A), the term
whose share of the gap between the two choices moved most, the tie-break, a failed attempt. A
change of policy or experiment arm is said first when there is one: the cause then names what the
other policy did differently.

Examples::

    A chose small-a, B chose big-b: another rule: A matched to-small (target small), B matched no rule
    (in B, to-small failed on request_time.hour = 17 not in [9, 11, 14, 16]).
    A chose v4-a, B chose small-a: another rule: A matched long (target deepseek-v4-32k), B matched no
    rule (in B, long failed on input_length = 18 <= 8000; other atoms failed too).
    A chose big-a, B chose big-b: a constraint verdict: in B, big-a: removed by kv-cache 91% > 85%.
"""

from __future__ import annotations

from app.explain import DASH, fmt_num
from app.ui.data.policy_step import failed_atoms, fmt_waited
from app.ui.data.scores import by_instance, chosen, gap_terms
from app.ui.data.why_not import reason_for
from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["diff_verdict"]

_KIND_CAUSE = {"target": "a rule's target", "absent": "the candidates", "constraint": "a constraint verdict",
               "attempt": "a failed attempt", "affinity": "the session's binding", "draw": "the picker's draw",
               "tie": "the tie-break", "outscored": "a score term", "order": "the attempt order"}


def diff_verdict(a: DecisionTrace, b: DecisionTrace) -> str:
    """One line: which instance each side chose, and what made them differ (or that they did not)."""
    x, y = chosen(a), chosen(b)
    policy = _policy(a, b)
    if (x and x.instance) == (y and y.instance):
        same = f"A and B chose the same instance, {x.instance if x else 'none'}"
        return f"{same} ({policy})." if policy else f"{same}."
    head = f"A chose {x.instance if x else 'no instance'}, B chose {y.instance if y else 'no instance'}: "
    return head + (f"{policy}; " if policy else "") + _cause(a, b, x, y) + "."


def _policy(a: DecisionTrace, b: DecisionTrace) -> str:
    if a.experiment_arm != b.experiment_arm:
        return f"another experiment arm ({a.experiment_arm or DASH} vs {b.experiment_arm or DASH})"
    if a.policy_hash != b.policy_hash:
        return f"another policy ({a.policy_hash} vs {b.policy_hash})"
    return ""


def _rule(t: DecisionTrace) -> str:
    """The policy rule that matched, with its target; ``no rule`` when none did.

    The trace's ``rule`` is then ``auto`` or ``model:<name>``: the plain path's name, not a rule.
    """
    step = t.policy
    if step is None or step.rule is None:
        named = t.rule.removeprefix("model:") if t.rule and t.rule.startswith("model:") else None
        return f"no rule (the request named {named})" if named else "no rule"
    return f"{step.rule} (target {step.target or 'every model'})"


def _failed_on(t: DecisionTrace, rule: str | None) -> str | None:
    """Why ``rule`` failed in ``t``: the atom that failed it first, and whether others did too.

    None: not tried there, or it matched.
    """
    if rule is None or t.policy is None:
        return None
    return next((failed_atoms(v.detail) for v in t.policy.tried if v.rule == rule and not v.matched and v.detail),
                None)


def _cause(a: DecisionTrace, b: DecisionTrace, x: CandidateEval | None, y: CandidateEval | None) -> str:
    rule_a, rule_b = (a.policy.rule if a.policy else None), (b.policy.rule if b.policy else None)
    if a.rule != b.rule:
        why = [f"in B, {rule_a} failed on {f}" for f in [_failed_on(b, rule_a)] if f]
        why += [f"in A, {rule_b} failed on {f}" for f in [_failed_on(a, rule_b)] if f]
        return f"another rule: A matched {_rule(a)}, B matched {_rule(b)}" + (f" ({'; '.join(why)})" if why else "")
    if x is None or y is None:
        side, t = ("A", a) if x is None else ("B", b)
        if t.policy is not None and t.policy.throttled == "reject":  # refused before any instance was looked at
            waited = "" if t.policy.waited_s is None else f" after waiting {fmt_waited(t.policy.waited_s)}"
            return f"nothing was chosen in {side} (rule {t.policy.rule}'s throttle was empty: refused with 429{waited})"
        return f"nothing was chosen in {side} ({t.fallback_reason or 'no feasible instance'})"
    lost = reason_for(b, x.instance, x.model)
    if lost is not None and lost.kind != "outscored":
        return f"{_KIND_CAUSE[lost.kind]}: in B, {x.instance}: {lost.text}"
    missed = reason_for(a, y.instance, y.model)
    if missed is not None and missed.kind in ("target", "absent", "constraint"):
        return f"{_KIND_CAUSE[missed.kind]}: in A, {y.instance}: {missed.text}"
    moved = _moved_term(a, b, x.instance, y.instance)
    if moved is not None:
        return moved
    return f"{_KIND_CAUSE[lost.kind]}: in B, {x.instance}: {lost.text}" if lost is not None else "another order"


def _moved_term(a: DecisionTrace, b: DecisionTrace, x: str, y: str) -> str | None:
    """The term whose share of ``total(x) - total(y)`` fell most from A to B (both scored on both sides)."""
    ca, cb = by_instance(a), by_instance(b)
    if not all(i in t and t[i].total is not None for t in (ca, cb) for i in (x, y)):
        return None
    in_a, in_b = gap_terms(a, ca[x], ca[y]), gap_terms(b, cb[x], cb[y])
    moves = {name: in_a[name] - in_b[name] for name in in_a if name in in_b}
    term, fell = max(moves.items(), key=lambda kv: kv[1], default=(None, 0.0))
    if term is None or fell <= 0:
        return None
    gap_a, gap_b = (ca[x].total or 0.0) - (ca[y].total or 0.0), (cb[x].total or 0.0) - (cb[y].total or 0.0)
    return (f"a score term: {term} moved {fmt_num(fell, 2)} towards {y} ({x} led by {fmt_num(gap_a, 2)} in A, "
            f"by {fmt_num(gap_b, 2)} in B)")
