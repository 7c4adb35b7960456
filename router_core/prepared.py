"""Per-snapshot memo of everything that depends only on an instance's state and the policy.

Snapshots change once per scrape round (about a second) while requests arrive much more often, so
the verdicts of state-only filters (the constraints) and the raw values of state-only scorers are
computed once per snapshot object and reused until the next tick: the seed's "state checkpoint",
with the decider only reading it. Suspect (ageing) state is never memoised, because its decay
depends on the decision time: an entry is used only while its snapshot is younger than
``suspect_after_s`` (which is also why the freshness filter, time-dependent only beyond that age,
can be memoised). This is a pure-function cache: results are identical without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from router_core.framework import Candidate, DecisionContext, Filter, Scorer, clamp_unit
from router_core.staleness import effective_state
from schemas.config import ScrapeSettings
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import Violation

__all__ = ["Prepared", "PreparedCache"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A candidate with its state-only verdicts (one per state-only filter) and raw terms."""

    candidate: Candidate
    verdicts: tuple[Violation | None, ...]
    terms: dict[str, float]
    flagged: bool  # any verdict at all: most candidates have none and skip the filter loops


_PER_INSTANCE = 64  # memoised snapshots per instance (its scrape's copies with in-flight counts); then cleared


class PreparedCache:
    """Computes and memoises :class:`Prepared` per instance, keyed by snapshot identity.

    An instance has several snapshot objects at once: its scrape's, and one per in-flight count the
    gateway folded into it (:class:`router_core.inflight.InflightCounter`). Each is memoised.

    Args:
        filters: State-only filters, in policy order.
        scorers: State-only scorers.
        scrape: Staleness bounds.
        queue_norm: The queue length suspect state decays toward (``scoring.queue_norm``).
    """

    def __init__(self, filters: Sequence[Filter], scorers: Sequence[Scorer], scrape: ScrapeSettings,
                 queue_norm: float) -> None:
        self._filters = list(filters)
        self._scorers = list(scorers)
        self._scrape = scrape
        self._queue_norm = queue_norm
        # instance -> id(snapshot) -> (snapshot, memo); the snapshot is kept, so its id is not reused
        self._memo: dict[str, dict[int, tuple[InstanceSnapshot, Prepared]]] = {}
        self._aged: dict[str, dict[int, tuple[InstanceSnapshot, int, bool, InstanceSnapshot]]] = {}

    def states_at(self, specs: Sequence[InstanceSpec], state: Mapping[str, InstanceSnapshot],
                  ages: Mapping[str, float | None]) -> dict[str, InstanceSnapshot]:
        """Each candidate's snapshot as the decision saw it: ``age_s`` and ``stale`` as of the decision.

        ``ages`` are the seconds since each snapshot was scraped, at the decision (the router
        computed them to prepare the candidates). The trace records the age to 0.1 s: a snapshot
        whose stamped age is within that stays the very object the scrape round handed over, and
        the decisions of the same tenth share one aged copy (one stored snapshot). Per candidate
        this is one dictionary look-up in the common case.
        """
        out: dict[str, InstanceSnapshot] = {}
        aged, suspect = self._aged, self._scrape.suspect_after_s
        for spec in specs:
            sid = spec.id
            snap, exact = state[sid], ages.get(sid)
            if exact is None:
                out[sid] = snap
                continue
            stale = exact > suspect
            tenth = int(exact * 10 + 0.5) if exact > 0 else 0
            mine = aged.get(sid)
            if mine is None:
                mine = aged[sid] = {}
            hit = mine.get(id(snap))
            if hit is not None and hit[0] is snap and hit[1] == tenth and hit[2] == stale:
                out[sid] = hit[3]
                continue
            if snap.age_s is not None and round(snap.age_s, 1) == tenth / 10 and snap.stale == stale:
                seen = snap
            else:
                seen = snap.model_copy(update={"age_s": tenth / 10, "stale": stale})
            if len(mine) >= _PER_INSTANCE:
                mine.clear()
            mine[id(snap)] = (snap, tenth, stale, seen)
            out[sid] = seen
        return out

    def get(self, spec: InstanceSpec, snap: InstanceSnapshot, age: float | None, ctx: DecisionContext) -> Prepared:
        """Return the prepared candidate for ``snap`` at ``ctx.now`` (``age``: seconds since scraped)."""
        fresh = age is not None and age <= self._scrape.suspect_after_s
        mine = self._memo.get(spec.id)
        if mine is None:
            mine = self._memo[spec.id] = {}
        hit = mine.get(id(snap))
        if fresh and hit is not None and hit[0] is snap:
            return hit[1]
        eff = effective_state(snap, ctx.now, self._scrape, self._queue_norm)
        candidate = Candidate(spec, snap, eff)
        verdicts = tuple(f.check(candidate, ctx) for f in self._filters)
        prepared = Prepared(
            candidate,
            verdicts,
            {s.name: clamp_unit(s.score([candidate], ctx))[0] for s in self._scorers},
            any(v is not None for v in verdicts),
        )
        if fresh and not eff.suspect:
            if len(mine) >= _PER_INSTANCE:
                mine.clear()
            mine[id(snap)] = (snap, prepared)
        else:
            mine.pop(id(snap), None)  # decaying state: recomputed every time
        return prepared
