"""The score step of a decision: the policy's weighted scorers over the feasible pool.

:class:`Scores` computes one column of clamped terms per scorer with a positive weight (state-only
terms come from the per-snapshot memo), the weighted totals scaled by the soft constraints'
factors, and, for the trace, the terms each candidate a hard constraint removed would have scored
(:meth:`Scores.counterfactual`). Each scorer's run is timed, observed and recorded as a step unless
the caller records nothing (``steps`` None).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from router_core.decide.decision import DecisionContext, Steps
from router_core.decide.policy import Policy
from router_core.decide.prepared import Prepared, PreparedCache
from router_core.decide.runner import Observer, Runner
from router_core.framework import clamp_unit, typed_name
from schemas.common import StepKind
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import Violation

__all__ = ["Scores"]


class Scores(Runner):
    """The policy's scorers and weights, run over a feasible pool."""

    def __init__(self, policy: Policy, prepared: PreparedCache, perf: Callable[[], float], observer: Observer) -> None:
        super().__init__(policy, prepared, perf)
        self._obs = {n: observer("scorer", s) for n, s in policy.scorers.items()}
        self._names = {n: typed_name(s) for n, s in policy.scorers.items()}

    def score(self, pool: list[Prepared], factors: dict[str, float], ctx: DecisionContext, steps: Steps,
              weights_out: list[dict[str, Any]], scale: dict[str, float] | None = None,
              ) -> tuple[list[float], list[list[float]]]:
        """Weighted terms per candidate (clamped to [0, 1]) and totals scaled by soft-constraint ramps.

        ``scale`` multiplies named weights (a rule's ``cost_params``).
        """
        profile, weights = self.policy.weights_at(ctx.now)
        for name, factor in (scale or {}).items():
            if name in weights:
                weights[name] *= factor
        totals, columns, _ = self.columns(pool, factors, ctx, weights, steps, profile, weights_out)
        terms = [list(row) for row in zip(*columns, strict=True)] if columns else [[] for _ in pool]
        return totals, terms

    def columns(self, pool: list[Prepared], factors: dict[str, float], ctx: DecisionContext,
                weights: Mapping[str, float], steps: Steps | None, profile: str = "",
                weights_out: list[dict[str, Any]] | None = None,
                ) -> tuple[list[float], list[list[float]], dict[str, float]]:
        """Totals, a column of clamped terms per weighted scorer, the weights used (``steps`` None: not recorded)."""
        candidates = [p.candidate for p in pool]
        columns: list[list[float]] = []
        used: dict[str, float] = {}
        totals = [0.0] * len(pool)
        scorers = self.policy.scorers
        for name, weight in weights.items():
            if weight <= 0 or name not in scorers:
                continue
            scorer = scorers[name]
            t0 = self._perf() if steps is not None else 0.0
            if scorer.STATE_ONLY:
                col = [p.terms[name] for p in pool]  # clamped when memoised
            else:
                col = clamp_unit(scorer.score(candidates, ctx))
            columns.append(col)
            used[name] = weight
            totals = [t + weight * x for t, x in zip(totals, col, strict=True)]
            if steps is None:
                continue
            took = self._perf() - t0
            if (observe := self._obs[name]) is not None:
                observe(took)
            if weights_out is not None:
                weights_out.append({"name": name, "weight": weight, "scorer": self._names[name]})
            steps.add(f"score/{name}", StepKind.SCORE, value=weight, plugin=self._names[name],
                      reason=f"weight {weight:g} ({profile})", duration_us=took * 1e6)
        if factors:
            totals = [t * factors.get(c.spec.id, 1.0) for t, c in zip(totals, candidates, strict=True)]
        return totals, columns, used

    def counterfactual(self, specs: Sequence[InstanceSpec], state: Mapping[str, InstanceSnapshot],
                       pool: list[Prepared], violations: dict[str, list[Violation]], ctx: DecisionContext,
                       ages: dict[str, float | None], weights: list[dict[str, Any]]) -> dict[str, list[float]]:
        """The terms each candidate a hard constraint removed would have scored, had it stayed.

        What makes a removal *decisive* (the removed candidate would have beaten the winner) readable
        from the trace. State-only terms come from the per-snapshot memo; the others are scored with
        the removed candidates beside the feasible ones, so relative terms (cost) see the same set.
        Nothing here changes the decision: totals and ranks stay those of the feasible pool.
        """
        if not pool or not weights:
            return {}
        kept = {p.candidate.spec.id for p in pool}
        out = [s for s in specs if s.id not in kept and s.id in violations]
        if not out:
            return {}
        gone = [self._prepared.get(s, state[s.id], ages.get(s.id), ctx) for s in out]
        scorers, columns = self.policy.scorers, []
        for w in weights:
            scorer = scorers[w["name"]]
            if scorer.STATE_ONLY:
                columns.append([p.terms[w["name"]] for p in gone])
            else:
                both = [p.candidate for p in pool] + [p.candidate for p in gone]
                columns.append(clamp_unit(scorer.score(both, ctx))[len(pool):])
        return {p.candidate.spec.id: list(row) for p, row in zip(gone, zip(*columns, strict=True), strict=True)}
