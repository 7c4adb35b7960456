"""Re-deciding stored rows under a policy, fast enough for a million traces.

:func:`router_core.replay.replay` builds a router and a full trace per request (about 1 ms here).
A range replay only needs each request's new first choice, and for the flips the terms and
verdicts that explain them, so :class:`Replayer` runs the router's own plugins through one
long-lived :class:`router_core.prepared.PreparedCache` (state-only verdicts and terms computed
once per stored snapshot) and reads the pick off the policy's picker, the steps
``Router.decide`` takes in the same order. Whenever nothing is feasible (the fallback model,
fail-open or reject) it hands the request to ``Router.decide`` itself. Inputs are exactly those
:func:`router_core.replay.replay` gives the router: the stored states, never-scraped snapshots for
instances the trace has none for, the policy's quality priors overridden by the stored quality
terms. ``tests/app/experiments/test_engine.py`` checks the choices against ``replay`` trace by trace.
``decide`` is :meth:`Replayer.rank` (filters and scorers) then :meth:`Replayer.pick` (the picker,
seeded by the request id), so :mod:`app.experiments.replay_memo` can share the first between rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from app.experiments.rows import ReplayRow
from router_core.decision import DecisionContext
from router_core.errors import UnknownModel
from router_core.framework import Scored, clamp_unit
from router_core.policy import Policy
from router_core.prepared import Prepared, PreparedCache
from router_core.quality import QualityTable
from router_core.router import AUTO_MODEL, Router
from router_core.scorers.latency import predicted_latency_ms
from router_core.scorers.quality import QualityScorer
from schemas.config import ModelProfile
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import Violation

__all__ = ["Replayed", "Replayer"]

_DEFAULT_PROFILE = ModelProfile()


@dataclass(slots=True)
class Replayed:
    """The new decision on one row: rule, first choice, and what explains a flip.

    ``terms``: raw terms of the scored candidates under the new policy (``weights`` order);
    ``removed``: the first hard verdict of each candidate a filter removed; ``known``: the
    instances the new policy considered; ``prepared``: each considered candidate as prepared.
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

    @property
    def known(self) -> set[str] | dict[str, Prepared]:
        """The instances the new policy considered."""
        return self.prepared

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
        self.router = Router(policy)
        self._filters = list(policy.filters)
        self._slot = {i: n for n, i in enumerate(i for i, f in enumerate(self._filters) if f.STATE_ONLY)}
        self._prepared = PreparedCache([f for f in self._filters if f.STATE_ONLY],
                                       [s for s in policy.scorers.values() if s.STATE_ONLY], policy.scrape,
                                       policy.queue_norm)
        self._never = {s.id: InstanceSnapshot(instance=s.id, model=s.model, engine=s.engine) for s in policy.fleet}
        self._base_quality = dict(QualityTable(policy.models).snapshot())
        self._quality: dict[tuple[str | None, tuple[tuple[str, float], ...]], dict[tuple[str, str], float]] = {}
        self._weights: dict[int, dict[str, float]] = {}
        self.specs = {s.id: s for s in policy.fleet}
        self._spec_ids = frozenset(self.specs)
        # Only the quality scorer reads ctx.quality: without one, the stored quality terms change nothing.
        weighted = {n for n, w in policy.base_weights.items() if w > 0}
        weighted |= {n for p in policy.profiles for n, w in p.weights.items() if w > 0}
        self._reads_quality = any(isinstance(s, QualityScorer) or not type(s).__module__.startswith("router_core.")
                                  for n, s in policy.scorers.items() if n in weighted)
        self.slow = 0  # rows handed to Router.decide

    def quality_for(self, row: ReplayRow) -> Mapping[tuple[str, str], float]:
        """The quality table ``replay`` would give the router for ``row`` (shared between equal rows)."""
        if not self._reads_quality:
            return self._base_quality
        names = [n for n, _ in row.weights]
        over: tuple[tuple[str, float], ...] = ()
        if "quality" in names and row.intent:
            at = names.index("quality")
            over = tuple((model, terms[at]) for (_, model), terms in zip(row.candidates, row.terms, strict=True)
                         if len(terms) > at)
        key = (row.intent, over)
        table = self._quality.get(key)
        if table is None:
            table = dict(self._base_quality)
            for model, value in over:
                table[(model, row.intent or "")] = value
            self._quality[key] = table
        return table

    def _weights_at(self, now: datetime) -> dict[str, float]:
        got = self._weights.get(now.hour)
        if got is None:
            got = self._weights[now.hour] = self.policy.weights_at(now)[1]
        return got

    def state_for(self, row: ReplayRow) -> Mapping[str, InstanceSnapshot]:
        """Stored states, never-scraped snapshots for the instances the trace has none for."""
        if self._spec_ids <= row.states.keys():
            return row.states
        return {**self._never, **row.states}

    def context(self, row: ReplayRow) -> DecisionContext:
        """The context ``replay`` would give the router for ``row`` (which must be replayable)."""
        assert row.features is not None
        return DecisionContext(request_id=row.request_id, features=row.features, intent=row.intent, now=row.ts,
                               quality=self.quality_for(row))

    def decide(self, row: ReplayRow) -> Replayed:
        """Return the new decision on ``row`` (which must be replayable)."""
        ctx = self.context(row)
        got, scored = self.rank(ctx, self.state_for(row))
        return got if scored is None else self.pick(row.request_id, got, scored)

    def rank(self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot],
             ) -> tuple[Replayed, list[Scored] | None]:
        """Filter and score the candidates: the decision without its pick, and the scored pool.

        The scored pool is None when the decision is already whole (a model the fleet does not
        serve, or nothing feasible and ``Router.decide`` took the fallback path).
        """
        requested = ctx.features.requested_model
        rule = "auto" if requested == AUTO_MODEL else f"model:{requested}"
        try:
            specs = self.router.candidates_for(requested)
        except UnknownModel:
            return Replayed(rule, None, None, note=f"model {requested} not in the fleet"), None
        prepared: dict[str, Prepared] = {}
        now, get = ctx.now, self._prepared.get
        for spec in specs:
            snap = state[spec.id]
            at = snap.scraped_at
            prepared[spec.id] = get(spec, snap, None if at is None else (now - at).total_seconds(), ctx)
        pool, removed, factors = self._filter(list(prepared.values()), ctx)
        if not pool:
            return self._slow(ctx, state, rule, prepared), None
        weights = self._weights_at(now)
        totals = [0.0] * len(pool)
        cols: list[list[float]] = []
        used: dict[str, float] = {}
        cands = [p.candidate for p in pool]
        scorers = self.policy.scorers
        for name, weight in weights.items():
            if weight <= 0 or name not in scorers:
                continue
            scorer = scorers[name]
            col = [p.terms[name] for p in pool] if scorer.STATE_ONLY else clamp_unit(scorer.score(cands, ctx))
            cols.append(col)
            used[name] = weight
            totals = [t + weight * x for t, x in zip(totals, col, strict=True)]
        if factors:
            totals = [t * factors.get(c.spec.id, 1.0) for t, c in zip(totals, cands, strict=True)]
        ids = [c.spec.id for c in cands]
        return (Replayed(rule, None, None, used, removed, prepared, ids=ids, cols=cols),
                list(zip(ids, totals, strict=True)))

    def pick(self, request_id: str, ranked: Replayed, scored: list[Scored]) -> Replayed:
        """The policy's picker on ``rank``'s scored pool: ``ranked`` with its first choice."""
        picked = self.policy.picker.pick(request_id, scored)
        first = picked.order[0] if picked.order else None
        model = ranked.prepared[first].candidate.spec.model if first is not None else None
        return Replayed(ranked.rule, first, model, ranked.weights, ranked.removed, ranked.prepared, ranked.note,
                        ranked.ids, ranked.cols)

    def _filter(self, alive: list[Prepared], ctx: DecisionContext,
                ) -> tuple[list[Prepared], dict[str, str], dict[str, float]]:
        """The feasible pool, the first hard verdict of each removed candidate, soft factors (as ``Router._filter``)."""
        removed: dict[str, str] = {}
        factors: dict[str, float] = {}
        slot = self._slot
        for i, flt in enumerate(self._filters):
            judged: Sequence[tuple[Prepared, Violation | None]]
            if i in slot:
                judged = [(p, p.verdicts[slot[i]]) for p in alive if p.flagged]
            else:
                judged = [(p, flt.check(p.candidate, ctx)) for p in alive]
            out: set[str] = set()
            for p, v in judged:
                if v is None:
                    continue
                iid = p.candidate.spec.id
                if v.severity == "soft":
                    factors[iid] = factors.get(iid, 1.0) * (v.score_factor or 0.0)
                else:
                    out.add(iid)
                    removed.setdefault(iid, flt.name or v.constraint)
            if out:
                alive = [p for p in alive if p.candidate.spec.id not in out]
        return alive, removed, factors

    def _slow(self, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot], rule: str,
              prepared: dict[str, Prepared]) -> Replayed:
        """Nothing feasible: ``Router.decide`` takes the fallback path itself."""
        self.slow += 1
        decision = self.router.decide(ctx, state)
        first = decision.selected
        weights = {w["name"]: w["weight"] for w in decision.weights}
        scored = [c for c in decision.candidates if c["total"] is not None]
        removed = {c["instance"]: next((v.constraint for v in c["violations"] if v.severity == "hard"), "filter")
                   for c in decision.candidates if not c["feasible"]}
        got = Replayed(decision.rule, first.id if first else None, first.model if first else None, weights, removed,
                       prepared, note=decision.fallback_reason, ids=[c["instance"] for c in scored])
        got._terms = {c["instance"]: list(c["score_terms"]) for c in scored}
        return got

    def latency_of(self, instance: str | None, got: Replayed) -> float | None:
        """The latency scorer's prediction (ms) for ``instance`` from its recorded state, or None."""
        if instance is None or (p := got.prepared.get(instance)) is None:
            return None
        spec: InstanceSpec = p.candidate.spec
        return predicted_latency_ms(p.candidate, self.policy.models.get(spec.model, _DEFAULT_PROFILE))

    def cost_of(self, instance: str | None) -> float | None:
        """The fleet's per-request cost of ``instance`` under this policy, or None when it has none."""
        spec = self.specs.get(instance) if instance is not None else None
        return None if spec is None else spec.cost.base
