"""``Router.decide``: filter -> score -> pick (-> fallback). Orchestration only.

The gateway has analysed the request and matched its rule before ``decide`` runs (the features and
the rule's :class:`~router_core.rules.route.RouteChoice` are in the context); ``decide`` records
both as its first steps, then runs the rule's levels through filter, score and pick.

The filter step is :mod:`router_core.decide.filtering`, the score step :mod:`router_core.decide.scoring`,
a rule's levels and the fallbacks :mod:`router_core.decide.fallback`; here are the order of the steps,
the pick and the decision's record.

``decide`` touches no I/O and returns a :class:`router_core.decide.decision.Decision`: given the same
context, snapshots and policy it gives the same decision, which is what makes a stored decision
replayable (see :mod:`router_core.decide.replay`). The router runs the plugins (the filters and scorers
through :class:`Filters` and :class:`Scores`): each call is timed, recorded as a step and observed in
``routelens_router_plugin_duration_seconds``, and scores are clamped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from router_core.decide.decision import Decision, DecisionContext, Steps
from router_core.decide.fallback import CONTEXT_LENGTH_EXCEEDED, FallbackNote, Fallbacks
from router_core.decide.filtering import Filters
from router_core.decide.policy import Policy
from router_core.decide.prepared import Prepared, PreparedCache
from router_core.decide.scoring import Scores
from router_core.errors import UnknownModel
from router_core.framework import typed_name
from router_core.metrics import PluginMetrics
from router_core.resilience.affinity import affine
from router_core.resilience.router_modes import static_pick
from schemas.common import RoutingMode, StepKind
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import Violation

__all__ = ["AUTO_MODEL", "CONTEXT_LENGTH_EXCEEDED", "Ranked", "Router", "rule_of"]

AUTO_MODEL = "auto"
Observe = Callable[[float], None] | None


def rule_of(model: str) -> str:
    """The rule of a request no policy rule routes: ``auto``, or ``model:<name>`` for a named model."""
    return "auto" if model == AUTO_MODEL else f"model:{model}"


@dataclass(slots=True)
class Ranked:
    """:meth:`Router.rank`'s result: the plain path's filter and score work, unrecorded.

    Attributes:
        rule: ``auto`` or ``model:<name>``.
        prepared: Every candidate looked at, prepared (as ``decide`` prepares them), by instance.
        removed: Each candidate a filter removed, with that filter's name (the first to remove it).
        weights: The score terms in force, by name, in column order.
        ids: The feasible candidates, in pool order.
        columns: One column of raw terms per weight, aligned with ``ids``.
        scored: ``(instance, total)`` of each feasible candidate, as the picker takes them.
    """

    rule: str
    prepared: dict[str, Prepared]
    removed: dict[str, str]
    weights: dict[str, float]
    ids: list[str]
    columns: list[list[float]]
    scored: list[tuple[str, float]]


class Router:
    """Ranks a fleet's instances for one request under a :class:`Policy`, recording why.

    Args:
        policy: Filters, scorers, weights and picker.
        perf: Monotonic clock for step durations (injected).
        metrics: Plugin duration histogram (None: not recorded).
    """

    def __init__(self, policy: Policy, *, perf: Callable[[], float] = time.perf_counter,
                 metrics: PluginMetrics | None = None) -> None:
        self.policy = policy
        self._perf = perf
        self._prepared = PreparedCache([f for f in policy.filters if f.STATE_ONLY],
                                       [s for s in policy.scorers.values() if s.STATE_ONLY], policy.scrape,
                                       policy.queue_norm)

        def observer(point: str, plugin: Any) -> Observe:
            return None if metrics is None else metrics.observer(point, plugin.TYPE, plugin.name)

        self._filters = Filters(policy, self._prepared, perf, observer)
        self._scores = Scores(policy, self._prepared, perf, observer)
        self._fallbacks = Fallbacks(policy, self._filters)
        self._picker_obs = observer("picker", policy.picker)
        self._picker_name = typed_name(policy.picker)
        self._weights_by_hour: dict[int, dict[str, float]] = {}  # rank(): the weights read the local hour alone

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

    def decide(self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot]) -> Decision:
        """Decide which instances to try for one request, best first, and record every step.

        Returns:
            The decision: feasible instances in attempt order; when none is feasible, the fallback
            model's, else every candidate whose context window holds the request (``on_empty:
            fail_open``; none: no targets, ``no_feasible`` :data:`CONTEXT_LENGTH_EXCEEDED`) or none
            (``reject``).

        Raises:
            UnknownModel: When no instance serves the requested model.
        """
        started, feats, steps, fb = self._perf(), ctx.features, Steps(), FallbackNote()
        steps.add("analyse", StepKind.ANALYSE, value=float(feats.est_input_tokens),
                  reason=f"{feats.n_messages} messages, ~{feats.est_input_tokens} tokens, lang={feats.language.value}, "
                         f"intent={ctx.intent}" + (", input cut for analysis" if feats.truncated else ""))
        ages: dict[str, float | None] = {}
        route = ctx.route if feats.requested_model == AUTO_MODEL else None
        spill: list[str] = []
        mc = ctx.mode
        is_auto = feats.requested_model == AUTO_MODEL
        safe = mc.safe_model if mc is not None and mc.mode is RoutingMode.SAFE and is_auto else None
        if mc is not None and safe and (safe_specs := self.policy.instances_of(safe)):
            route, rule, specs = None, f"safe:{safe}", list(safe_specs)  # the router's safe mode overrides rules
            fb.note(mc.reason, RoutingMode.SAFE)
            steps.add("policy", StepKind.POLICY, reason=f"rule {rule}: {mc.reason}", instances=[s.id for s in specs])
            pool, violations, factors = self._filters.run(specs, state, ctx, steps, ages)
        elif route is not None and route.rule is not None:
            rule = route.rule.name
            specs, pool, violations, factors, spill = self._fallbacks.by_rule(route, state, ctx, steps, fb, ages)
        else:
            specs = list(self.candidates_for(feats.requested_model))
            rule = rule_of(feats.requested_model)
            tried = f" (no policy rule matched of {len(route.match.tried)})" if route is not None else ""
            steps.add("policy", StepKind.POLICY, reason=f"rule {rule}{tried}", instances=[s.id for s in specs])
            pool, violations, factors = self._filters.run(specs, state, ctx, steps, ages)
        degraded = route.degraded() if route is not None and route.rule is not None else None
        if not pool and degraded is None:
            pool, specs = self._fallbacks.when_empty(specs, state, ctx, steps, fb, rule, violations, factors, ages)
        elif not pool and degraded is not None:
            why = f"no feasible instance on rule {rule}'s chain; answering from {degraded.name}"
            fb.note(why, RoutingMode.RULES)
            fb.empty = "degraded"
            steps.add("fallback", StepKind.FALLBACK, reason=why, instances=[degraded.name])
        weights: list[dict[str, Any]] = []
        scale = {"cost": route.cost_factor(self.policy.peak_hours.at(ctx.now))} \
            if route is not None and route.rule is not None else None  # peak: in routing.timezone, as prices
        if (budget := ctx.budget) is not None and budget.cost_factor != 1.0:  # the budget's rising cost weight
            scale = {"cost": (scale or {}).get("cost", 1.0) * budget.cost_factor}
            steps.add("budget", StepKind.SCORE, value=round(budget.cost_factor, 6),
                      reason=f"cost weight x{budget.cost_factor:.3g}: {budget.reason}")
        static = mc is not None and mc.mode is RoutingMode.STATIC
        terms: list[list[float]]
        if static:  # the router's static mode: no scoring, preset weights in round robin
            totals, terms = [0.0] * len(pool), [[] for _ in pool]
        else:
            totals, terms = self._scores.score(pool, factors, ctx, steps, weights, scale)
        scored = [(p.candidate.spec.id, t) for p, t in zip(pool, totals, strict=True)]
        removed = self._scores.counterfactual(specs, state, pool, violations, ctx, ages, weights)
        t0 = self._perf()
        if mc is not None and static:
            fb.note(mc.reason, RoutingMode.STATIC)
            picked = static_pick([i for i, _ in scored], [p.candidate.spec.model for p in pool], mc)
        else:
            picked = self.policy.picker.pick(ctx.request_id, scored)
        if self._picker_obs is not None:
            self._picker_obs(self._perf() - t0)
        if ctx.affinity is not None:  # the session's instance first while feasible; a move is recorded
            first = picked.order[0] if picked.order else None
            affine_order, why = affine(picked.order, ctx.affinity, violations)
            steps.add("affinity", StepKind.PICK, reason=why, instances=affine_order[:1])
            if affine_order[:1] != [first]:
                picked = type(picked)(affine_order, f"{picked.how}; {why}", 1.0)
        order = picked.order + [iid for iid in spill if iid not in picked.order]
        seen = self._prepared.states_at(specs, state, ages)  # age_s and stale as of the decision
        candidates = self._candidates(specs, seen, violations, factors, dict(zip(order, range(1, len(order) + 1),
                                      strict=True)), {p.candidate.spec.id: (t, x) for p, t, x in
                                                      zip(pool, totals, terms, strict=True)}, removed,
                                      picked.probabilities)
        if order:
            steps.add("pick", StepKind.PICK, value=round(dict(scored)[order[0]], 6), plugin=self._picker_name,
                      reason=picked.how, instances=[order[0]])
        by_id = {s.id: s for s in specs}
        return Decision(rule=rule, targets=tuple(by_id[iid] for iid in order), candidates=candidates,
                        weights=tuple(weights), steps=tuple(steps), fallback_reason=fb.reason, mode=fb.mode,
                        decision_ms=(self._perf() - started) * 1e3, selection_probability=picked.probability,
                        degraded=degraded, levels=fb.levels, inputs=ctx.inputs(), no_feasible=fb.empty)

    def rank(self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot]) -> Ranked | None:
        """The plain path of :meth:`decide` without its record: filter and score the requested model's candidates.

        What a range replay re-decides a million stored requests with (``decide`` also builds every
        candidate's record, the steps and the counterfactual terms). Pick with :meth:`pick`. None
        when ``decide`` would take another path: a rule, the router's modes, a budget, a session's
        binding; ``decide`` it then. Nothing feasible: ``scored`` is empty, and ``decide`` takes the
        fallback path (the fallback model, fail open or reject).

        Raises:
            UnknownModel: When no instance serves the requested model.
        """
        feats = ctx.features
        route = ctx.route if feats.requested_model == AUTO_MODEL else None
        if (route is not None and route.rule is not None) or ctx.mode is not None or ctx.budget is not None \
                or ctx.affinity is not None:
            return None
        specs = self.candidates_for(feats.requested_model)
        removed: dict[str, str] = {}
        ages: dict[str, float | None] = {}
        prepared = self._filters.prepare(specs, state, ctx, ages)
        pool, _, factors = self._filters.run(specs, state, ctx, None, ages, removed, prepared)
        rule = rule_of(feats.requested_model)
        by_id = {p.candidate.spec.id: p for p in prepared}
        if not pool:
            return Ranked(rule, by_id, removed, {}, [], [], [])
        hour = self.policy.scoring_hour(ctx.now)  # in scoring.timezone: a UTC hour maps to another across DST
        weights = self._weights_by_hour.get(hour)
        if weights is None:
            weights = self._weights_by_hour[hour] = self.policy.weights_at(ctx.now)[1]
        totals, columns, used = self._scores.columns(pool, factors, ctx, weights, None)
        ids = [p.candidate.spec.id for p in pool]
        return Ranked(rule, by_id, removed, used, ids, columns, list(zip(ids, totals, strict=True)))

    def pick(self, request_id: str, scored: list[tuple[str, float]]) -> str | None:
        """The instance the policy's picker chooses first from :meth:`rank`'s ``scored`` (seeded by the request id)."""
        order = self.policy.picker.pick(request_id, scored).order
        return order[0] if order else None


    @staticmethod
    def _candidates(specs: list[InstanceSpec], state: Mapping[str, InstanceSnapshot],
                    violations: dict[str, list[Violation]], factors: dict[str, float], rank: dict[str, int],
                    scored: dict[str, tuple[float, list[float]]], removed: dict[str, list[float]],
                    chances: Mapping[str, float] | None = None,
                    ) -> tuple[dict[str, Any], ...]:
        """Every evaluated candidate with its verdicts, state, terms, total, rank and chance.

        A removed candidate keeps its would-be terms (``removed``) but no total and no rank.
        ``chances``: each candidate's probability of being drawn, from a sampling picker (None:
        the pick was deterministic, or a session's binding overrode the draw).
        """
        chances = chances or {}
        hard = {iid for iid, vs in violations.items() if any(v.severity == "hard" for v in vs)}
        none: tuple[float, list[float]] = (0.0, [])
        return tuple({
            "instance": s.id, "model": s.model, "zone": s.zone, "feasible": s.id not in hard,
            "violations": violations.get(s.id, ()), "state": state[s.id],
            "score_terms": scored[s.id][1] if s.id in scored else removed.get(s.id, none[1]),
            "weight_factor": factors.get(s.id, 1.0),
            "total": scored[s.id][0] if s.id in scored else None, "rank": rank.get(s.id),
            "probability": chances.get(s.id),
        } for s in specs)
