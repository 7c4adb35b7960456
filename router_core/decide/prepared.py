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
from typing import Generic, TypeVar

from router_core.framework import Candidate, Filter, RequestContext, Scorer, clamp_unit
from router_core.state.staleness import effective_state
from schemas.config import ScrapeSettings
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import Violation

__all__ = ["Prepared", "PreparedCache"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Prepared:
    """A candidate with its state-only verdicts (one per state-only filter) and raw terms."""

    candidate: Candidate
    verdicts: tuple[Violation | None, ...]
    terms: dict[str, float]
    flagged: bool  # any verdict at all: most candidates have none and skip the filter loops


_PER_INSTANCE = 64  # memoised snapshots per instance (its scrape's copies with in-flight counts); then cleared


class _BySnapshot(Generic[T]):
    """Values memoised per snapshot object, several per instance (at most ``_PER_INSTANCE``, then cleared).

    Keyed by ``id(snapshot)``; the snapshot is kept with its value, so an id is never reused while
    it is memoised.
    """

    def __init__(self) -> None:
        self._by: dict[str, dict[int, tuple[InstanceSnapshot, T]]] = {}

    def get(self, iid: str, snap: InstanceSnapshot) -> T | None:
        mine = self._by.get(iid)
        hit = None if mine is None else mine.get(id(snap))
        return hit[1] if hit is not None and hit[0] is snap else None

    def put(self, iid: str, snap: InstanceSnapshot, value: T) -> None:
        mine = self._by.setdefault(iid, {})
        if len(mine) >= _PER_INSTANCE:
            mine.clear()
        mine[id(snap)] = (snap, value)

    def drop(self, iid: str, snap: InstanceSnapshot) -> None:
        if (mine := self._by.get(iid)) is not None:
            mine.pop(id(snap), None)


class PreparedCache:
    """Computes and memoises :class:`Prepared` per instance, keyed by snapshot identity.

    An instance has several snapshot objects at once: its scrape's, and one per in-flight count the
    gateway folded into it (:class:`router_core.state.inflight.InflightCounter`). Each is memoised.

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
        self._memo: _BySnapshot[Prepared] = _BySnapshot()
        self._aged: _BySnapshot[tuple[int, bool, InstanceSnapshot]] = _BySnapshot()  # (tenth, stale, aged copy)

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
            hit = aged.get(sid, snap)
            if hit is not None and hit[0] == tenth and hit[1] == stale:
                out[sid] = hit[2]
                continue
            if snap.age_s is not None and round(snap.age_s, 1) == tenth / 10 and snap.stale == stale:
                seen = snap
            else:
                seen = snap.model_copy(update={"age_s": tenth / 10, "stale": stale})
            aged.put(sid, snap, (tenth, stale, seen))
            out[sid] = seen
        return out

    def get(self, spec: InstanceSpec, snap: InstanceSnapshot, age: float | None, ctx: RequestContext) -> Prepared:
        """Return the prepared candidate for ``snap`` at ``ctx.now`` (``age``: seconds since scraped)."""
        # Never scraped (age None): the state does not change with time either; memoised unless it is
        # suspect (saturated until a scrape lands), that is unless it is an external instance's.
        fresh = age is None or age <= self._scrape.suspect_after_s
        hit = self._memo.get(spec.id, snap) if fresh else None
        if hit is not None:
            return hit
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
            self._memo.put(spec.id, snap, prepared)
        else:
            self._memo.drop(spec.id, snap)  # decaying state: recomputed every time
        return prepared
