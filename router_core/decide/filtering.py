"""The filter step of a decision: each policy filter over the request's candidates, in order.

:class:`Filters` prepares the candidates (their state-only verdicts and terms come from the
per-snapshot memo, :mod:`router_core.decide.prepared`), stops the models a spent budget stops, then
runs the policy's filters: a hard verdict removes the candidate, a soft one multiplies its score
factor. Each filter's run is timed, observed (``routelens_router_plugin_duration_seconds``) and
recorded as a step, unless the caller records nothing (``steps`` None: :meth:`Router.rank`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from router_core.decide.decision import DecisionContext, Steps
from router_core.decide.policy import Policy
from router_core.decide.prepared import Prepared, PreparedCache
from router_core.decide.runner import Observer, Runner
from router_core.framework import typed_name
from router_core.resilience.budgets import budget_violation
from router_core.state.staleness import elapsed_s
from schemas.common import StepKind
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import Violation

__all__ = ["Filtered", "Filters"]

Filtered = tuple[list[Prepared], dict[str, list[Violation]], dict[str, float]]  # kept, verdicts, soft factors


class Filters(Runner):
    """The policy's filters, run over prepared candidates (the memo's state-only filters are the policy's, in order)."""

    def __init__(self, policy: Policy, prepared: PreparedCache, perf: Callable[[], float], observer: Observer) -> None:
        super().__init__(policy, prepared, perf)
        state_only = [i for i, f in enumerate(policy.filters) if f.STATE_ONLY]
        self._slot = {i: n for n, i in enumerate(state_only)}  # filter index -> memoised verdict position
        self._obs = [observer("filter", f) for f in policy.filters]
        self._steps = [(f"filter/{f.name}", typed_name(f)) for f in policy.filters]  # computed once, not per decision

    def prepare(self, specs: Sequence[InstanceSpec], state: Mapping[str, InstanceSnapshot], ctx: DecisionContext,
                ages: dict[str, float | None]) -> list[Prepared]:
        """Each candidate prepared at ``ctx.now``; its state's age (seconds) goes into ``ages``."""
        out, now = [], ctx.now
        for spec in specs:
            snap = state[spec.id]
            ages[spec.id] = age = None if snap.scraped_at is None else elapsed_s(now, snap.scraped_at)
            out.append(self._prepared.get(spec, snap, age, ctx))
        return out

    def run(self, specs: Sequence[InstanceSpec], state: Mapping[str, InstanceSnapshot], ctx: DecisionContext,
            steps: Steps | None, ages: dict[str, float | None], removed: dict[str, str] | None = None,
            prepared: list[Prepared] | None = None) -> Filtered:
        """The candidates every filter keeps, the verdicts, the soft factors (``steps`` None: not recorded).

        ``removed`` (when given) gets, for each candidate a filter removed, that filter's name;
        ``prepared``: ``specs`` already prepared.
        """
        alive = self.prepare(specs, state, ctx, ages) if prepared is None else prepared
        violations: dict[str, list[Violation]] = {}
        factors: dict[str, float] = {}
        if (budget := ctx.budget) is not None and budget.use >= 1.0:  # a spent budget stops its models
            stop = [p.candidate.spec.id for p in alive if budget.is_stopped(p.candidate.spec.model)]
            for iid in stop:
                violations[iid] = [budget_violation(budget)]
            alive = [p for p in alive if p.candidate.spec.id not in violations]
            if steps is not None and stop:
                steps.add("filter/budget", StepKind.FILTER, value=float(len(alive)), reason=budget.reason,
                          rejected=stop)
        slot = self._slot
        for i, flt in enumerate(self.policy.filters):
            t0 = self._perf() if steps is not None else 0.0
            rejected: list[str] = []
            if i in slot:  # memoised verdicts: only flagged candidates can be affected
                judged = [(p, p.verdicts[slot[i]]) for p in alive if p.flagged]
            else:
                judged = [(p, flt.check(p.candidate, ctx)) for p in alive]
            for p, v in judged:
                if v is None:
                    continue
                iid = p.candidate.spec.id
                violations.setdefault(iid, []).append(v)
                if v.severity == "soft":
                    factors[iid] = factors.get(iid, 1.0) * (v.score_factor or 0.0)
                else:
                    rejected.append(iid)
                    if removed is not None:
                        removed.setdefault(iid, flt.name or v.constraint)
            if rejected:
                out = set(rejected)
                alive = [p for p in alive if p.candidate.spec.id not in out]
            if steps is None:
                continue
            took = self._perf() - t0
            if (observe := self._obs[i]) is not None:
                observe(took)
            step, typed = self._steps[i]
            steps.add(step, StepKind.FILTER, value=float(len(alive)), plugin=typed,
                      reason=f"kept {len(alive)}, rejected {len(rejected)}", rejected=rejected, duration_us=took * 1e6)
        return alive, violations, factors
