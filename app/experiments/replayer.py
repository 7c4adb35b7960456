"""Re-deciding stored rows under a policy with the router's own engine, fast enough for a million traces.

:func:`router_core.decide.replay` builds a router and a full trace per request (about 1 ms here). A range
replay needs each request's new first choice and, for the flips, the terms and verdicts that
explain them: :meth:`router_core.Router.rank` is ``Router.decide``'s plain path (the same filters,
scorers and memoised per-snapshot work) without its record, and :meth:`router_core.Router.pick`
its picker. Whatever ``rank`` does not cover (a rule, the router's modes, nothing feasible) is
decided by ``Router.decide`` itself. This module only turns a stored row into the router's inputs,
exactly those :func:`router_core.decide.replay` gives it: the stored states, never-scraped snapshots for
instances the trace has none for, the policy's quality priors overridden by the stored quality
terms, and what the gateway settled (the rule, looked up by name in this policy's rule set, the
router's mode, the session's instance, the budget, the blocked instances: ``row.settled``)
(``tests/app/experiments/test_engine.py`` checks the choices against ``replay`` trace by trace).
:mod:`app.experiments.replay_memo` shares ``rank``'s work between rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.experiments.rows import ReplayRow, Settled
from router_core import (
    DecisionContext,
    Policy,
    Prepared,
    QualityScorer,
    QualitySnapshot,
    QualityTable,
    Router,
    Scored,
    UnknownModel,
    expected_tokens,
    load_rules,
    predicted_latency_ms,
    route_of,
    rule_of,
    settled,
)
from schemas.config import ModelProfile
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import RequestFeatures

__all__ = ["Replayed", "Replayer"]

_DEFAULT_PROFILE = ModelProfile()


@dataclass(slots=True)
class Replayed:
    """The new decision on one row: rule, first choice, and what explains a flip.

    ``terms``: raw terms of the scored candidates under the new policy (``weights`` order);
    ``removed``: the first hard verdict of each candidate a filter removed; ``known``: the
    instances the new policy considered; ``prepared``: each considered candidate as prepared (the
    plain path only: ``Router.decide`` keeps no prepared candidates, so a rule-routed decision
    names what it considered in ``considered``); ``target``: the primary target of the rule that
    routed the new decision (None: every model, or no rule routed it).
    """

    rule: str | None
    instance: str | None
    model: str | None
    weights: dict[str, float] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)
    prepared: dict[str, Prepared] = field(default_factory=dict)
    note: str | None = None
    ids: list[str] = field(default_factory=list)
    cols: list[list[float]] = field(default_factory=list)
    _terms: dict[str, list[float]] | None = None
    considered: frozenset[str] | None = None
    target: str | None = None

    @property
    def known(self) -> frozenset[str] | dict[str, Prepared]:
        """The instances the new policy considered."""
        return self.prepared if self.considered is None else self.considered

    @property
    def terms(self) -> dict[str, list[float]]:
        """Raw terms of each scored candidate (``weights`` order), built on first use (flips only)."""
        if self._terms is None:
            self._terms = {iid: [col[k] for col in self.cols] for k, iid in enumerate(self.ids)}
        return self._terms


class Replayer:
    """Re-decides :class:`ReplayRow` values under one policy; keep one per process and feed it rows in time order."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.router = Router(policy)  # one router: its per-snapshot memo is shared by every row
        self._never = {s.id: InstanceSnapshot(instance=s.id, model=s.model, engine=s.engine) for s in policy.fleet}
        self._base_quality = dict(QualityTable(policy.models).snapshot())
        self._quality: dict[tuple[str | None, tuple[tuple[str, str, float], ...]], QualitySnapshot] = {}
        self.specs = {s.id: s for s in policy.fleet}
        self._spec_ids = frozenset(self.specs)
        # Only the quality scorer reads ctx.quality: without one, the stored quality terms change nothing.
        weighted = {n for n, w in policy.base_weights.items() if w > 0}
        weighted |= {n for p in policy.profiles for n, w in p.weights.items() if w > 0}
        self._reads_quality = any(isinstance(s, QualityScorer) or not type(s).__module__.startswith("router_core.")
                                  for n, s in policy.scorers.items() if n in weighted)
        self.slow = 0  # rows handed to Router.decide
        # The policy's rule set: a stored rule-routed decision keeps its rule when the policy has it.
        config = policy.config
        self.rules = load_rules(config.routing.policy, config) if config is not None and config.routing.policy \
            else None
        self._contexts: dict[tuple[int, int], tuple[Settled, tuple[Any, ...]]] = {}

    def quality_for(self, row: ReplayRow) -> Mapping[tuple[str, str], float]:
        """The quality table ``replay`` would give the router for ``row`` (shared between equal rows)."""
        if not self._reads_quality:
            return self._base_quality
        names = [n for n, _ in row.weights]
        over: tuple[tuple[str, str, float], ...] = ()
        if "quality" in names and row.intent:
            at = names.index("quality")
            over = tuple((instance, model, terms[at])
                         for (instance, model), terms in zip(row.candidates, row.terms, strict=True) if len(terms) > at)
        key = (row.intent, over)
        table = self._quality.get(key)
        if table is None:  # per instance too, as router_core.decide.replay.context_of: siblings may have scored apart
            models, scored = dict(self._base_quality), {}
            for instance, model, value in over:
                models[(model, row.intent or "")] = scored[(instance, row.intent or "")] = value
            table = self._quality[key] = QualitySnapshot(models, scored)
        return table

    def state_for(self, row: ReplayRow) -> Mapping[str, InstanceSnapshot]:
        """Stored states, never-scraped snapshots for the instances the trace has none for."""
        if self._spec_ids <= row.states.keys():
            return row.states
        return {**self._never, **row.states}

    def context(self, row: ReplayRow) -> DecisionContext:
        """The context ``replay`` would give the router for ``row`` (which must be replayable)."""
        assert row.features is not None
        if row.settled is None:
            return DecisionContext(request_id=row.request_id, features=row.features, intent=row.intent, now=row.ts,
                                   quality=self.quality_for(row))
        route, mode, affinity, budget, blocked = self._settled(row.settled, row.ts)
        return DecisionContext(request_id=row.request_id, features=row.features, intent=row.intent, now=row.ts,
                               quality=self.quality_for(row), blocked=blocked, route=route, mode=mode,
                               affinity=affinity, budget=budget)

    def _settled(self, st: Settled, ts: datetime) -> tuple[Any, ...]:
        """The route (by rule name, in this policy's rule set), mode, affinity, budget and breakers of a row.

        Raises:
            NotReplayable: The row's rule is not in this policy's rule set.
        """
        key = (id(st), ts.hour if st.inputs.local_hour is None else -1)  # the hour matters only when not stored
        hit = self._contexts.get(key)
        if hit is not None and hit[0] is st:  # the row's own object (kept alive here, so its id is not reused)
            return hit[1]
        if len(self._contexts) >= 100_000:
            self._contexts.clear()
        route = route_of(st.rule, st.target, st.throttled, st.inputs, self.rules, ts) if st.stepped else None
        mode, budget, blocked = settled(st.inputs)
        got = (route, mode, st.inputs.affinity, budget, blocked)
        self._contexts[key] = (st, got)
        return got

    def decide(self, row: ReplayRow) -> Replayed:
        """Return the new decision on ``row`` (which must be replayable)."""
        ctx = self.context(row)
        got, scored = self.rank(ctx, self.state_for(row))
        return got if scored is None else self.pick(row.request_id, got, scored)

    def rank(self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot],
             ) -> tuple[Replayed, list[Scored] | None]:
        """The router's filters and scorers (:meth:`Router.rank`): the decision without its pick, and the scored pool.

        The scored pool is None when the decision is already whole (a model the fleet does not
        serve, or a path ``rank`` does not take, which ``Router.decide`` then decided).
        """
        requested = ctx.features.requested_model
        try:
            ranked = self.router.rank(ctx, state)
        except UnknownModel:
            return Replayed(rule_of(requested), None, None, note=f"model {requested} not in the fleet"), None
        if ranked is None or not ranked.scored:
            return self._slow(ctx, state, {} if ranked is None else ranked.prepared), None
        return (Replayed(ranked.rule, None, None, ranked.weights, ranked.removed, ranked.prepared, ids=ranked.ids,
                         cols=ranked.columns), ranked.scored)

    def pick(self, request_id: str, ranked: Replayed, scored: list[Scored]) -> Replayed:
        """The policy's picker (:meth:`Router.pick`) on ``rank``'s scored pool: ``ranked`` with its first choice."""
        first = self.router.pick(request_id, scored)
        model = ranked.prepared[first].candidate.spec.model if first is not None else None
        return Replayed(ranked.rule, first, model, ranked.weights, ranked.removed, ranked.prepared, ranked.note,
                        ranked.ids, ranked.cols)

    def _slow(self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot],
              prepared: dict[str, Prepared]) -> Replayed:
        """``Router.decide`` itself: nothing feasible (its fallbacks), or a path ``rank`` does not take."""
        self.slow += 1
        decision = self.router.decide(ctx, state)
        first = decision.selected
        weights = {w["name"]: w["weight"] for w in decision.weights}
        scored = [c for c in decision.candidates if c["total"] is not None]
        removed = {c["instance"]: next((v.constraint for v in c["violations"] if v.severity == "hard"), "filter")
                   for c in decision.candidates if not c["feasible"]}
        rule = ctx.route.rule if ctx.route is not None else None
        got = Replayed(decision.rule, first.id if first else None, first.model if first else None, weights, removed,
                       prepared, note=decision.fallback_reason, ids=[c["instance"] for c in scored],
                       considered=frozenset(c["instance"] for c in decision.candidates),
                       target=rule.primary if rule is not None and rule.name == decision.rule else None)
        got._terms = {c["instance"]: list(c["score_terms"]) for c in scored}
        return got

    def latency_of(self, instance: str | None, got: Replayed, row: ReplayRow | None = None) -> float | None:
        """The latency scorer's prediction (ms) for ``instance`` from its recorded state, or None.

        From the candidate as the new decision prepared it. A decision ``Router.decide`` made (a
        rule's, the router's modes, a session's) keeps no prepared candidates: given ``row``, the
        candidate is prepared from the row's state as ``rank`` prepares it. With ``row``, an
        instance whose state the trace does not hold has no prediction (the router would have read a
        never-scraped snapshot: nothing recorded to predict from). None also for no instance, or
        one not in this policy's fleet.
        """
        if instance is None or (row is not None and instance not in row.states):
            return None
        p = got.prepared.get(instance)
        if p is None and row is not None:
            p = self._prepared(instance, row)
        if p is None:
            return None
        spec: InstanceSpec = p.candidate.spec
        return predicted_latency_ms(p.candidate, self.policy.models.get(spec.model, _DEFAULT_PROFILE))

    def _prepared(self, instance: str, row: ReplayRow) -> Prepared | None:
        """``instance`` prepared for ``row`` at its time (``Router.rank`` for the instance's model, no rule settled)."""
        spec = self.specs.get(instance)
        if spec is None or row.features is None:
            return None
        features = row.features.model_copy(update={"requested_model": spec.model})
        ctx = DecisionContext(request_id=row.request_id, features=features, intent=row.intent, now=row.ts,
                              quality=self.quality_for(row))
        try:
            ranked = self.router.rank(ctx, self.state_for(row))
        except UnknownModel:
            return None
        return None if ranked is None else ranked.prepared.get(instance)

    def cost_of(self, instance: str | None, at: datetime, features: RequestFeatures | None = None) -> float | None:
        """The price of ``instance`` under this policy for a request at ``at`` (the trace's ``ts``), as scored.

        ``cost.base``, plus with token prices the request's expected tokens at them (from its
        ``features``: the estimated input, the expected completion), times ``cost.surge_multiplier``
        when ``at`` falls in this policy's ``routing.peak_hours`` (local hours in its
        ``routing.timezone``). None when the fleet has no such instance.
        """
        spec = self.specs.get(instance) if instance is not None else None
        if spec is None:
            return None
        tokens = expected_tokens(spec.cost, features) if spec.cost.per_token and features is not None else (0, 0)
        return self.policy.price(spec.cost, at, *tokens)
