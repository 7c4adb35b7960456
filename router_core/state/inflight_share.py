"""In-flight counts across gateway workers: each publishes its own, every picker adds the others'.

With one process, :class:`~router_core.state.inflight.InflightCounter` sees every request sent since
an instance's last scrape. With N workers each saw only its own, so N workers could herd onto the
same best instance within one scrape interval. Here each worker publishes its counts on the shared
state's ``inflight`` channel, and each folds what the others last said into its counter's
``remote`` counts, which :meth:`InflightCounter.adjust` adds to ``queue`` like its own.

Granularity (what the shared-state design allows without a Redis round trip per request): a worker
publishes every ``interval_s`` (0.1 s) when its counts changed, and at least every ``heartbeat_s``
while any is open; so another worker's requests are seen within about ``interval_s`` of being
sent. Each worker reports its counts since *its* last scrape of the instance, and the workers scrape
the same engines at the same interval, so a request leaves every count within about one scrape
interval of the engine's gauges including it. A worker not heard for ``expire_s`` (it died or lost
Redis) counts for nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from router_core.shared.base import SharedState
from router_core.state.inflight import InflightCounter

__all__ = ["CHANNEL", "InflightShare"]

CHANNEL = "inflight"


class InflightShare:
    """Publishes this worker's in-flight counts and keeps the other workers' in ``counter.remote``.

    Args:
        counter: This worker's counter; its ``remote`` counts are replaced with the others' sum.
        shared: The workers' shared state (publish/subscribe).
        replica: This worker's id in the messages (its own are ignored when they come back).
        clock: Monotonic seconds (injected).
    """

    def __init__(self, counter: InflightCounter, shared: SharedState, replica: str, *,
                 clock: Callable[[], float] = time.monotonic, interval_s: float = 0.1, heartbeat_s: float = 0.5,
                 expire_s: float = 1.0) -> None:
        self._counter = counter
        self._shared = shared
        self._replica = replica
        self._clock = clock
        self.interval_s = interval_s
        self._heartbeat_s = heartbeat_s
        self._expire_s = expire_s
        self._others: dict[str, tuple[float, dict[str, int]]] = {}  # replica -> (heard at, counts)
        self._last: dict[str, int] = {}
        self._sent_at = float("-inf")
        shared.subscribe(CHANNEL, self._heard)

    def _heard(self, message: dict[str, Any]) -> None:
        replica, counts = message.get("replica"), message.get("counts")
        if not isinstance(replica, str) or replica == self._replica or not isinstance(counts, dict):
            return
        self._others[replica] = (self._clock(), {k: v for k, v in counts.items()
                                                 if isinstance(k, str) and isinstance(v, int) and v > 0})
        self._fold()

    def _fold(self) -> None:
        """Sum the counts of the workers heard lately into the counter's ``remote``."""
        now = self._clock()
        total: dict[str, int] = {}
        for replica, (heard, counts) in list(self._others.items()):
            if now - heard > self._expire_s:
                del self._others[replica]
                continue
            for iid, n in counts.items():
                total[iid] = total.get(iid, 0) + n
        self._counter.remote = total

    async def tick(self) -> None:
        """Publish this worker's counts if they changed (or a heartbeat is due); forget silent workers."""
        counts = self._counter.local_counts()
        now = self._clock()
        if counts != self._last or (counts and now - self._sent_at >= self._heartbeat_s):
            self._last, self._sent_at = counts, now
            await self._shared.publish(CHANNEL, {"replica": self._replica, "counts": counts})
        if self._others:
            self._fold()

    async def run(self) -> None:
        """Tick every ``interval_s`` until cancelled."""
        while True:
            await asyncio.sleep(self.interval_s)
            await self.tick()
