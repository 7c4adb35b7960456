"""Shared counters added to locally and flushed to Redis in batches (budget spend, call counts).

An add goes to ``pending`` at once and returns the total as this replica knows it: the shared total
at the last flush (or read), plus what it added since. Every ``flush_s`` the background writer
sends all pending adds in one pipeline; each answer is the shared total after it, which includes
the other replicas' flushed adds. A flush that fails puts its adds back, to go with the next one
(an add that was applied but whose answer was lost is then counted twice: spend errs high). So the
shared total lags by at most one flush interval per replica, and a replica's own adds are never
missing from what it reads.

The last known total of each counter (and when it expires) is kept while the counter lives: a
restarted, empty Redis gets it back (:meth:`CounterBatch.known`, written by :mod:`.redis_totals`),
and the pending adds come on top, as ever: they are never part of a known total.

Pure bookkeeping (clock injected, no I/O), as :mod:`router_core.shared.redis_lease`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CounterBatch", "PendingAdd"]


@dataclass(slots=True)
class PendingAdd:
    """What this replica added to one counter since the last flush, and when that counter expires."""

    amount: float
    ttl_s: float
    expires: float


class CounterBatch:
    """Pending adds and the last known shared totals of one replica's counters."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.pending: dict[str, PendingAdd] = {}
        self._known: dict[str, tuple[float, float]] = {}  # counter -> (shared total, expires at)
        self.flushes = 0

    def add(self, counter: str, amount: float, ttl_s: float) -> float:
        """Count ``amount`` locally (flushed later); the counter's total as known now."""
        now = self._clock()
        p = self.pending.get(counter)
        if p is None or p.expires <= now:
            known = self._known.get(counter)
            expires = known[1] if known is not None and known[1] > now else now + ttl_s
            p = self.pending[counter] = PendingAdd(0.0, ttl_s, expires)
        p.amount += amount
        return self.total(counter)

    def total(self, counter: str) -> float:
        """The shared total at the last flush or read (0 once expired) plus this replica's pending adds."""
        now = self._clock()
        known = self._known.get(counter)
        base = known[0] if known is not None and known[1] > now else 0.0
        p = self.pending.get(counter)
        return base + (p.amount if p is not None and p.expires > now else 0.0)

    def drain(self) -> dict[str, PendingAdd]:
        """The pending adds for one flush (pending is empty after; adds meanwhile start afresh)."""
        out, self.pending = self.pending, {}
        return out

    def flushed(self, batch: dict[str, PendingAdd], totals: list[tuple[float, float]]) -> None:
        """Apply a flush's answers: ``(shared total, seconds it has left)`` per counter of ``batch``, in order."""
        now = self._clock()
        for counter, (total, ttl_left) in zip(batch, totals, strict=True):
            self._known[counter] = (total, now + ttl_left)
        self.flushes += 1
        self._forget(now)

    def learned(self, counter: str, total: float, ttl_left_s: float) -> None:
        """A shared total read from Redis (it holds the flushed adds; the pending ones come on top)."""
        now = self._clock()
        self._known[counter] = (total, now + ttl_left_s) if ttl_left_s > 0 else (0.0, now)

    def restore(self, batch: dict[str, PendingAdd]) -> None:
        """A flush that failed: its adds are pending again (before those made meanwhile); expired ones dropped."""
        now = self._clock()
        for counter, p in batch.items():
            if p.expires <= now:
                continue
            later = self.pending.get(counter)
            if later is not None:
                p.amount += later.amount
            self.pending[counter] = p

    def known(self) -> list[tuple[str, float, float]]:
        """``(counter, last known shared total, seconds it has left)`` of each counter still within its TTL."""
        now = self._clock()
        self._forget(now)
        return [(counter, total, expires - now) for counter, (total, expires) in self._known.items()]

    def _forget(self, now: float) -> None:
        for counter in [c for c, (_, expires) in self._known.items() if expires <= now]:
            del self._known[counter]
