"""Requests the gateway itself has sent since each instance's last scrape, folded into its state.

A scrape is up to a second old, and at 20 requests/s every request of that second would otherwise
see the same state and the ``max`` picker would send them all to the one best instance (herding).
The gateway counts each attempt it sends (:meth:`InflightCounter.begin`) until it completes
(:meth:`InflightCounter.end`). When a new scrape of an instance lands (its ``scraped_at`` moves),
its count starts again from zero: the engine's gauges then include those requests already.

The decision sees the count through the snapshots themselves (:meth:`InflightCounter.adjust`):
the requests sent since the scrape are added to ``queue``, work the instance has not shown yet.
That is the load every preset reads (the seed score's queue term, the latency prediction's
backlog); ``running`` would reach only the balance term, and engines admit a burst into running
only after their scheduler has seen it. ``decide()`` stays a pure function of the snapshots it is
given, and the candidate's recorded state is what it was decided on (its ``queue`` then includes
the gateway's own requests), so a stored decision replays the same way. Adjusted snapshots are
memoised per (scrape, count), every count seen since the scrape: under concurrency the count moves
up and down with every request, and one object per count keeps the router's per-snapshot memos
and the trace encoder's snapshot cache hitting (a new object per request missed all three).

With several gateway workers, the other workers' counts arrive in :attr:`InflightCounter.remote`
(:mod:`router_core.state.inflight_share`) and are added the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from schemas.fleet import InstanceSnapshot

__all__ = ["InflightCounter", "Ticket"]


@dataclass(frozen=True, slots=True)
class Ticket:
    """One attempt counted on ``instance`` while its scrape number ``epoch`` was the latest."""

    instance: str
    epoch: int


class InflightCounter:
    """Per-instance count of attempts sent since the last scrape and not yet completed.

    Not thread-safe: the gateway uses it from its event loop only.

    Attributes:
        remote: The other gateway workers' counts per instance (empty with one worker).
    """

    def __init__(self) -> None:
        self.remote: dict[str, int] = {}
        self._fresh: dict[str, int] = {}
        self._epoch: dict[str, int] = {}
        self._seen: dict[str, datetime | None] = {}
        self._memo: dict[str, tuple[InstanceSnapshot, dict[int, InstanceSnapshot]]] = {}  # iid -> scrape, by count

    def begin(self, instance: str) -> Ticket:
        """Count one attempt sent to ``instance``; hand the ticket back to :meth:`end`."""
        self._fresh[instance] = self._fresh.get(instance, 0) + 1
        return Ticket(instance, self._epoch.get(instance, 0))

    def end(self, ticket: Ticket) -> None:
        """The attempt completed; a scrape that landed since then already dropped it."""
        if ticket.epoch == self._epoch.get(ticket.instance, 0):
            self._fresh[ticket.instance] = max(self._fresh.get(ticket.instance, 0) - 1, 0)

    def count(self, instance: str) -> int:
        """Attempts sent to ``instance`` since its last scrape and still open (by this worker)."""
        return self._fresh.get(instance, 0)

    def open(self, instance: str) -> int:
        """Attempts sent to ``instance`` since its last scrape and still open, this worker's and the others'.

        For an ``engine: external`` instance (never scraped) that is every attempt still open: its queue.
        """
        return self._fresh.get(instance, 0) + self.remote.get(instance, 0)

    def local_counts(self) -> dict[str, int]:
        """This worker's open counts, instances with none left out (what it tells the other workers)."""
        return {iid: n for iid, n in self._fresh.items() if n > 0}

    def landed(self, instance: str, scraped_at: datetime | None) -> None:
        """Note the scrape time of ``instance``'s state; a new one restarts its count."""
        if self._seen.get(instance, scraped_at) != scraped_at:
            self._epoch[instance] = self._epoch.get(instance, 0) + 1
            self._fresh[instance] = 0
        self._seen[instance] = scraped_at

    def adjust(self, state: Mapping[str, InstanceSnapshot]) -> dict[str, InstanceSnapshot]:
        """Return ``state`` with each instance's open attempts (this worker's and the others') added to its ``queue``.

        Instances with nothing open keep their very snapshot object; missing gauges stay missing
        (the router already treats them as saturated).
        """
        out: dict[str, InstanceSnapshot] = {}
        for iid, snap in state.items():
            self.landed(iid, snap.scraped_at)
            n = self._fresh.get(iid, 0) + self.remote.get(iid, 0) if self.remote else self._fresh.get(iid, 0)
            if n == 0 or snap.queue is None:
                out[iid] = snap
                continue
            hit = self._memo.get(iid)
            if hit is None or hit[0] is not snap:
                hit = self._memo[iid] = (snap, {})
            adjusted = hit[1].get(n)
            if adjusted is None:
                adjusted = hit[1][n] = snap.model_copy(update={"queue": snap.queue + n})
            out[iid] = adjusted
        return out
