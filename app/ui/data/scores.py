"""What a trace says about standing: totals, who led, who was chosen, and each term's share of a gap.

Pure functions over a :class:`schemas.trace.DecisionTrace`, shared by the one reason each loser gets
(:mod:`app.ui.data.why_not`), the minimal flip (:mod:`app.ui.data.flip`) and the decision diff.

A candidate's ``rank`` is its place in the attempt order: after a sampling picker's draw the drawn
instance is rank 1 whatever its total. The *leader* is the scored candidate with the highest total
(ties by rank): the max-score winner, and a sampling picker's most likely draw.
"""

from __future__ import annotations

from collections.abc import Iterable

from router_core import tie_key
from schemas.common import RoutingMode
from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["EPS", "by_instance", "chosen", "gap_terms", "is_sampled", "leader", "scored", "tie_break", "total_of"]

EPS = 1e-9


def total_of(trace: DecisionTrace, cand: CandidateEval) -> float:
    """The candidate's recorded total, or ``weight_factor * sum(weighted terms)`` when none was recorded.

    A candidate a constraint removed has no total: this is the total its recorded would-be terms give.
    """
    if cand.total is not None:
        return cand.total
    return cand.weight_factor * sum(w for _, _, _, w in trace.terms_of(cand))


def scored(trace: DecisionTrace) -> list[CandidateEval]:
    """The candidates the picker chose among (feasible, with a total; all of them when failing open), best first."""
    pool = [c for c in trace.candidates if c.total is not None and (c.feasible or trace.mode == RoutingMode.FAIL_OPEN)]
    return sorted(pool, key=lambda c: (-(c.total or 0.0), c.rank or 0, c.instance))


def leader(trace: DecisionTrace) -> CandidateEval | None:
    """The scored candidate with the highest total (None: nothing was scored)."""
    pool = scored(trace)
    return pool[0] if pool else None


def chosen(trace: DecisionTrace) -> CandidateEval | None:
    """The candidate that served (``selected_instance``), else the picker's first (rank 1), else None."""
    by = by_instance(trace)
    if trace.selected_instance in by:
        return by[trace.selected_instance]
    first = [c for c in trace.candidates if c.rank == 1]
    return first[0] if first else None


def by_instance(trace: DecisionTrace) -> dict[str, CandidateEval]:
    """The candidates by instance id."""
    return {c.instance: c for c in trace.candidates}


def is_sampled(trace: DecisionTrace) -> bool:
    """Whether a sampling picker drew the winner (a recorded chance below 1)."""
    p = trace.selection_probability
    return (p is not None and p < 1 - EPS) or any(c.probability is not None for c in trace.candidates)


def gap_terms(trace: DecisionTrace, ahead: CandidateEval, behind: CandidateEval) -> dict[str, float]:
    """Each term's share of ``total(ahead) - total(behind)``: ``weight * (factor_a * raw_a - factor_b * raw_b)``.

    The shares add up to the gap of the recomputed totals, the soft-constraint factors included.
    """
    raw_behind = {name: raw for name, raw, _, _ in trace.terms_of(behind)}
    return {name: weight * (ahead.weight_factor * raw - behind.weight_factor * raw_behind[name])
            for name, raw, weight, _ in trace.terms_of(ahead) if name in raw_behind}


def tie_break(request_id: str, instances: Iterable[str]) -> str:
    """The instance the router's picker puts first among ``instances`` tied on total.

    Exact ties go by ``mmh3(request_id:instance)``, the lowest unsigned hash first (the pickers'
    shared ranking, :func:`router_core.tie_key`): the same request always breaks a tie the same way.
    """
    return min(instances, key=lambda iid: tie_key(request_id, iid))
