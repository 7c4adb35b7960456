"""``Router.decide``: analyse -> policy -> filter -> score -> pick (-> fallback). Orchestration only.

``decide`` touches no I/O: given the same context, snapshots and policy it gives the same ranking,
which is what makes a stored decision replayable (see :mod:`router_core.replay`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from router_core.errors import UnknownModel
from router_core.framework import DecisionContext
from router_core.pickers import pick
from router_core.policy import Policy
from router_core.prepared import Prepared, PreparedCache
from router_core.recorder import TraceRecorder
from schemas.common import RoutingMode, StepKind
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import Violation

__all__ = ["AUTO_MODEL", "Router"]

AUTO_MODEL = "auto"


def _typed(plugin: Any) -> str:
    return f"{plugin.name}/{plugin.TYPE}"


class Router:
    """Ranks a fleet's instances for one request under a :class:`Policy`, recording why.

    Args:
        policy: Filters, scorers, weights and picker.
        perf: Monotonic clock for step durations (injected).
    """

    def __init__(self, policy: Policy, *, perf: Callable[[], float] = time.perf_counter) -> None:
        self.policy = policy
        self._perf = perf
        self._state_filters = {i: f for i, f in enumerate(policy.filters) if f.STATE_ONLY}
        self._prepared = PreparedCache(list(self._state_filters.values()),
                                       [s for s in policy.scorers.values() if s.STATE_ONLY], policy.scrape)

    @property
    def models(self) -> list[str]:
        """Models served by the fleet."""
        return self.policy.models_served

    def candidates_for(self, model: str) -> Sequence[InstanceSpec]:
        """Return the instances that may serve ``model`` (every instance for ``auto``)."""
        if model == AUTO_MODEL:
            return self.policy.fleet
        specs = self.policy.instances_of(model)
        if specs is None:
            raise UnknownModel(f"The model '{model}' does not exist", param="model", code="model_not_found")
        return specs

    def _prepare(self, specs: Sequence[InstanceSpec], state: Mapping[str, InstanceSnapshot], ctx: DecisionContext,
                 ) -> list[Prepared]:
        out = []
        for spec in specs:
            snap = state[spec.id]
            age = None if snap.scraped_at is None else (ctx.now - snap.scraped_at).total_seconds()
            out.append(self._prepared.get(spec, snap, age, ctx))
        return out

    def _filter(self, specs: Sequence[InstanceSpec], state: Mapping[str, InstanceSnapshot], ctx: DecisionContext,
                rec: TraceRecorder) -> tuple[list[Prepared], dict[str, list[Violation]], dict[str, float]]:
        alive = self._prepare(specs, state, ctx)
        violations: dict[str, list[Violation]] = {}
        factors: dict[str, float] = {}
        slot = {i: n for n, i in enumerate(self._state_filters)}  # filter index -> verdict position
        for i, flt in enumerate(self.policy.filters):
            t0 = self._perf()
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
            if rejected:
                out = set(rejected)
                alive = [p for p in alive if p.candidate.spec.id not in out]
            rec.step(f"filter/{flt.name}", StepKind.FILTER, value=float(len(alive)), plugin=_typed(flt),
                     reason=f"kept {len(alive)}, rejected {len(rejected)}", rejected=rejected,
                     duration_us=(self._perf() - t0) * 1e6)
        return alive, violations, factors

    def decide(
        self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot], rec: TraceRecorder
    ) -> list[InstanceSpec]:
        """Rank the instances to try, best first, appending every step to ``rec``.

        Returns:
            Feasible instances in attempt order; when none is feasible, the fallback model's, else
            every candidate (``on_empty: fail_open``) or nothing (``reject``), all recorded.

        Raises:
            UnknownModel: When no instance serves the requested model.
        """
        started, feats = self._perf(), ctx.features
        rec.step("analyse", StepKind.ANALYSE, value=float(feats.est_input_tokens),
                 reason=f"{feats.n_messages} messages, ~{feats.est_input_tokens} tokens, lang={feats.language.value}, "
                        f"intent={ctx.intent}" + (", input cut for analysis" if feats.truncated else ""))
        specs = list(self.candidates_for(feats.requested_model))
        rec.rule = "auto" if feats.requested_model == AUTO_MODEL else f"model:{feats.requested_model}"
        rec.step("policy", StepKind.POLICY, reason=f"rule {rec.rule}", instances=[s.id for s in specs])
        pool, violations, factors = self._filter(specs, state, ctx, rec)
        if not pool:
            pool, specs = self._when_empty(specs, state, ctx, rec, violations, factors)
        totals, terms = self._score(pool, factors, ctx, rec)
        scored = [(p.candidate.spec.id, t) for p, t in zip(pool, totals, strict=True)]
        order, how = pick(self.policy.router.picker, ctx.request_id, scored, self.policy.router.softmax_temperature)
        self._record(specs, state, violations, factors, dict(zip(order, range(1, len(order) + 1), strict=True)),
                     {p.candidate.spec.id: (t, x) for p, t, x in zip(pool, totals, terms, strict=True)}, rec)
        by_id = {s.id: s for s in specs}
        if order:
            rec.selected = (by_id[order[0]].model, order[0])
            rec.step("pick", StepKind.PICK, value=round(dict(scored)[order[0]], 6),
                     plugin=f"{self.policy.router.picker}/picker", reason=how, instances=[order[0]])
        rec.decision_ms = (self._perf() - started) * 1e3
        return [by_id[iid] for iid in order]

    def _when_empty(self, specs: list[InstanceSpec], state: Mapping[str, InstanceSnapshot], ctx: DecisionContext,
                    rec: TraceRecorder, violations: dict[str, list[Violation]], factors: dict[str, float],
                    ) -> tuple[list[Prepared], list[InstanceSpec]]:
        """Nothing feasible: the fallback model's instances, then fail open or reject, as configured."""
        pol, requested = self.policy, ctx.features.requested_model
        fb = pol.router.fallback_model
        if fb and fb != requested and (extra := pol.instances_of(fb)):
            rec.fallback(f"no feasible instance of {rec.rule}; trying fallback model {fb}")
            rec.step("fallback", StepKind.FALLBACK, reason=rec.fallback_reason or "", instances=[s.id for s in extra])
            specs = specs + [s for s in extra if s not in specs]
            pool, more, more_factors = self._filter(extra, state, ctx, rec)
            violations.update(more)
            factors.update(more_factors)
            if pool:
                return pool, specs
        if pol.router.on_empty == "fail_open":
            pool = self._prepare(specs, state, ctx)
            rec.fallback("no feasible instance; failing open over all candidates", RoutingMode.FAIL_OPEN)
        else:
            pool = []
            rec.fallback("no feasible instance; rejecting (on_empty: reject)", RoutingMode.SAFE)
        rec.step("fallback", StepKind.FALLBACK, reason=rec.fallback_reason or "",
                 instances=[p.candidate.spec.id for p in pool])
        return pool, specs

    def _score(self, pool: list[Prepared], factors: dict[str, float], ctx: DecisionContext, rec: TraceRecorder,
               ) -> tuple[list[float], list[list[float]]]:
        """Weighted terms per candidate (clamped to [0, 1]) and totals scaled by soft-constraint ramps."""
        profile, weights = self.policy.weights_at(ctx.now)
        candidates = [p.candidate for p in pool]
        columns: list[list[float]] = []
        totals = [0.0] * len(pool)
        for name, weight in weights.items():
            if weight <= 0 or name not in self.policy.scorers:
                continue
            scorer, t0 = self.policy.scorers[name], self._perf()
            if scorer.STATE_ONLY:
                col = [p.terms[name] for p in pool]  # clamped when memoised
            else:  # clamp: a bad plugin cannot break a trace
                col = [0.0 if x < 0.0 else 1.0 if x > 1.0 else x for x in scorer.score(candidates, ctx)]
            columns.append(col)
            totals = [t + weight * x for t, x in zip(totals, col, strict=True)]
            rec.score_weights.append({"name": name, "weight": weight, "scorer": _typed(scorer)})
            rec.step(f"score/{name}", StepKind.SCORE, value=weight, plugin=_typed(scorer),
                     reason=f"weight {weight:g} ({profile})", duration_us=(self._perf() - t0) * 1e6)
        if factors:
            totals = [t * factors.get(c.spec.id, 1.0) for t, c in zip(totals, candidates, strict=True)]
        terms = [list(row) for row in zip(*columns, strict=True)] if columns else [[] for _ in pool]
        return totals, terms

    @staticmethod
    def _record(specs: list[InstanceSpec], state: Mapping[str, InstanceSnapshot],
                violations: dict[str, list[Violation]], factors: dict[str, float], rank: dict[str, int],
                scored: dict[str, tuple[float, list[float]]], rec: TraceRecorder) -> None:
        """Every evaluated candidate with its verdicts, state, terms, total and rank."""
        hard = {iid for iid, vs in violations.items() if any(v.severity == "hard" for v in vs)}
        none: tuple[float, list[float]] = (0.0, [])
        rec.candidates = [{
            "instance": s.id, "model": s.model, "zone": s.zone, "feasible": s.id not in hard,
            "violations": violations.get(s.id, ()), "state": state[s.id],
            "score_terms": scored.get(s.id, none)[1], "weight_factor": factors.get(s.id, 1.0),
            "total": scored[s.id][0] if s.id in scored else None, "rank": rank.get(s.id),
        } for s in specs]
