"""One reason for each candidate that was not chosen: the single sentence a "why not X?" gets.

Pure: a :class:`schemas.trace.DecisionTrace` in, :class:`Reason` values out. The kinds, tried in
this order (the first that applies is the reason):

- ``target``: left out by the matched rule's target: a model of its chain kept as a fallback
  (looked at, not scored), or not looked at at all (absent from the trace, which lists only the
  instances of the levels the rule reached).
  A request the rule's throttle refused considered no instance; one it sent down the chain
  skipped the target's instances: these are ``target`` reasons too.
- ``absent``: not a candidate of this decision for another reason (another requested model).
- ``constraint``: removed by a hard constraint, at the value it read (the first hard violation).
- ``attempt``: it was tried (put first by the picker, or by a breaker's trial) and its attempt failed;
  then who served: the instance of the attempt that answered, or why none did.
- ``affinity``: the request's session is bound to the instance that served.
- ``draw``: a sampling picker did not draw it; it had probability ``p``.
- ``tie``: equal totals; the tie-break (mmh3 of the request id) put the other first.
- ``outscored``: the score term that contributed most to its gap to the chosen one, by how much.
- ``order``: anything else (the static mode's round robin, a fallback model): its place in the order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.explain import fmt_num, fmt_pct, served_by, unjudged, unserved_text, violation_short
from app.ui.data.policy_step import fmt_waited
from app.ui.data.scores import EPS, by_instance, chosen, gap_terms, is_sampled, leader
from schemas.common import AttemptStatus, RoutingMode
from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["Reason", "ReasonKind", "reason_for", "reasons", "reasons_rows"]

ReasonKind = Literal["target", "absent", "constraint", "attempt", "affinity", "draw", "tie", "outscored", "order"]


@dataclass(frozen=True, slots=True)
class Reason:
    """Why one instance was not chosen.

    Attributes:
        instance: The instance.
        kind: Which kind of reason (see the module docstring).
        text: The reason in words, e.g. ``outscored by big-b on latency by 0.04 (0.52 vs 0.56)``.
        term: ``outscored``: the term; ``constraint``: the constraint; ``target``: the rule.
        amount: ``outscored``: the term's share of the gap; ``constraint``: the value read;
            ``draw``: the probability it had.
    """

    instance: str
    kind: ReasonKind
    text: str
    term: str | None = None
    amount: float | None = None


def reasons(trace: DecisionTrace) -> dict[str, Reason]:
    """The reason of every candidate of ``trace`` but the chosen one (the one that served, else the pick)."""
    won = chosen(trace)
    return {c.instance: _reason(trace, c, won) for c in trace.candidates if won is None or c.instance != won.instance}


def reason_for(trace: DecisionTrace, instance: str, model: str | None = None) -> Reason | None:
    """The reason ``instance`` (of ``model``) was not chosen in ``trace``; None when it was.

    An instance absent from the trace is explained too: left out by the rule's target when a rule
    routed the request (and ``model`` is not one of its levels), else not a candidate.
    """
    cand = by_instance(trace).get(instance)
    if cand is None:
        return _absent(trace, instance, model)
    won = chosen(trace)
    return None if won is not None and won.instance == instance else _reason(trace, cand, won)


def reasons_rows(trace: DecisionTrace) -> list[dict[str, str]]:
    """One row per candidate not chosen, best placed first: instance, model and its one reason."""
    why = reasons(trace)
    order = sorted(trace.candidates, key=lambda c: (not c.feasible, c.total is None, -(c.total or 0.0), c.instance))
    return [{"instance": c.instance, "model": c.model, "why not": why[c.instance].text}
            for c in order if c.instance in why]


def _absent(trace: DecisionTrace, instance: str, model: str | None) -> Reason:
    step = trace.policy
    if step is not None and step.rule is not None and step.throttled == "reject":
        waited = "" if step.waited_s is None else f" after waiting {fmt_waited(step.waited_s)} (its max_wait)"
        return Reason(instance, "target", f"not looked at: rule {step.rule}'s throttle was empty, so the request was "
                                          f"refused with 429{waited} before any instance was considered", step.rule)
    if step is not None and step.rule is not None and step.throttled == "chain" and model == step.target:
        return Reason(instance, "target", f"skipped: rule {step.rule}'s throttle was empty, so the request went "
                                          f"down its chain past its target {step.target}", step.rule)
    if step is not None and step.rule is not None and step.target is not None:
        levels = [step.target, *step.chain]
        if model is None or model not in levels:
            return Reason(instance, "target", f"left out by rule {step.rule}'s target {step.target}"
                          + (f" (chain {' → '.join(step.chain)})" if step.chain else ""), step.rule)
        return Reason(instance, "target", f"not looked at by rule {step.rule} ({model} is on its chain)", step.rule)
    requested = trace.features.requested_model
    if model is not None and requested != "auto" and model != requested:
        return Reason(instance, "absent", f"not an instance of the requested model {requested}")
    return Reason(instance, "absent", "not a candidate of this decision")


def _reason(trace: DecisionTrace, cand: CandidateEval, won: CandidateEval | None) -> Reason:
    step, iid = trace.policy, cand.instance
    if step is not None and step.rule is not None and iid in unjudged(trace):
        target = step.target or "every model"
        return Reason(iid, "target", f"left out by rule {step.rule}'s target {target}: {cand.model} is on its "
                                     f"chain, tried only after {target}", step.rule)
    hard = [v for v in cand.violations if v.severity == "hard"]
    if not cand.feasible and trace.mode != RoutingMode.FAIL_OPEN:
        if not hard:
            return Reason(iid, "constraint", "removed by a constraint (no violation recorded)")
        v = hard[0]
        return Reason(iid, "constraint", f"removed by {violation_short(v)}", v.constraint, v.value)
    failed = [a for a in trace.attempts if a.instance == iid and a.status != AttemptStatus.OK]
    if failed:
        a = failed[0]
        err = f", {a.error_class}" if a.error_class else ""
        first = min(trace.attempts, key=lambda x: x.seq) is a
        lead = "picked first" if cand.rank == 1 else "tried first" if first else "tried"
        served = served_by(trace)
        then = f"{served} served" if served is not None else \
            f"no instance served the request ({unserved_text(trace)})"
        return Reason(iid, "attempt", f"{lead}, but its attempt failed ({a.status.value}{err}); {then}")
    if won is None or cand.total is None or won.total is None:
        return _order(iid, cand, won)
    if trace.mode == RoutingMode.STATIC:
        return Reason(iid, "order", f"the static mode takes turns by round robin, not by score: it was "
                                    f"{won.instance}'s turn")
    bound = [s for s in trace.decision_trace if s.step == "affinity" and s.instances[:1] == [won.instance]]
    if bound and cand.total > won.total + EPS:
        return Reason(iid, "affinity", f"scored higher, but the session is bound to {won.instance} ({bound[0].reason})")
    if is_sampled(trace) and (cand.probability is None or cand.probability > EPS):
        p = cand.probability
        chance = "its chance was not recorded" if p is None else f"it had probability {_pct(p)}"
        drew = "" if won.probability is None else f" (drawn with {_pct(won.probability)})"
        return Reason(iid, "draw", f"not drawn by the sampling picker: {chance}; it drew {won.instance}{drew}",
                      amount=p)
    if abs(cand.total - won.total) < EPS:
        return Reason(iid, "tie", f"lost the tie-break to {won.instance}: both scored {fmt_num(won.total)}; "
                                  "equal totals go by mmh3(request_id:instance)")
    ref = won if won.total >= cand.total else (leader(trace) or won)
    shares = gap_terms(trace, ref, cand)
    term, share = max(shares.items(), key=lambda kv: kv[1], default=(None, 0.0))
    if term is None or share <= EPS:
        return _order(iid, cand, won)
    soft = [v for v in cand.violations if v.severity == "soft"]
    scaled = f"; its total was scaled ×{fmt_num(cand.weight_factor)} by {soft[0].constraint}" \
        if soft and cand.weight_factor < 1 else ""
    return Reason(iid, "outscored", f"outscored by {ref.instance} on {term} by {fmt_num(share, 2)} "
                                    f"({fmt_num(cand.total)} vs {fmt_num(ref.total)}){scaled}", term, share)


def _pct(p: float) -> str:
    return fmt_pct(p) if p >= 0.01 else fmt_num(p)


def _order(iid: str, cand: CandidateEval, won: CandidateEval | None) -> Reason:
    served = f"; {won.instance} was chosen" if won is not None else ""
    if cand.rank is None:
        return Reason(iid, "order", f"not ranked{served}")
    return Reason(iid, "order", f"ranked {cand.rank} in the attempt order{served}")
