"""The background half of :class:`~router_core.shared.redis_shared.RedisShared`: refill rounds and write rounds.

A refill round takes every due lease's tokens from the shared buckets in one pipeline
(:mod:`.redis_refill`); a write round sends what accumulated locally in one pipeline: pending
counter adds, binding writes, messages (``keep``: their state kept too), idle leases' tokens given
back and, every ``presence_s``, the heartbeat, whose answer is the replica count. A write round
Redis does not answer puts the adds and binding writes back for the next one; its messages are
dropped (their kept states owed). Two tasks run the rounds: the refiller when a lease wants one,
the writer every ``flush_s`` or at once when a message waits.

:class:`RedisBackground` is a base of :class:`~router_core.shared.redis_shared.RedisShared` only:
the parts and counts it uses are the ones ``RedisShared.__init__`` sets (declared here).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable
from typing import Any

from redis.asyncio.client import Pipeline

from router_core.shared.redis_bindings import BindingMirror
from router_core.shared.redis_counters import CounterBatch
from router_core.shared.redis_kept import KeptMessages
from router_core.shared.redis_lease import BucketLeases
from router_core.shared.redis_refill import LeaseRefills
from router_core.shared.redis_store import RedisStore

__all__ = ["RedisBackground"]

log = logging.getLogger("router_core.shared.redis_shared")  # one logger for RedisShared, whichever half logs


class RedisBackground:
    """Refill and write rounds, and the tasks that run them, over the parts of a :class:`RedisShared`."""

    store: RedisStore
    leases: BucketLeases
    refills: LeaseRefills
    counters: CounterBatch
    bindings: BindingMirror
    kept: KeptMessages
    flush_s: float
    presence_s: float
    replicas: int
    dropped: int
    _clock: Callable[[], float]
    _writes: int
    _outbox: list[tuple[str, dict[str, Any], str | None, int]]
    _wake: asyncio.Event
    _next_presence: float
    _next_sweep: float

    async def refill(self) -> None:
        """One refill round: every due lease's refill in one pipeline; then waiting takes try again."""
        await self.refills.refill()

    async def flush(self, *, release: bool = False) -> None:
        """One write round: pending adds, binding writes, messages, idle leases' tokens back, the heartbeat.

        ``release``: give every lease's tokens back (at shutdown).
        """
        now = self._clock()
        back = self.leases.release() if release else self.leases.sweep() if now >= self._next_sweep else []
        if now >= self._next_sweep:
            self._next_sweep = now + 1.0
        beat = now >= self._next_presence and not release
        adds, binds = self.counters.drain(), self.bindings.drain()
        msgs, self._outbox = self._outbox, []
        if not (adds or binds or msgs or back or beat):
            return
        store = self.store

        def build(pipe: Pipeline) -> None:
            for counter, p in adds.items():
                store.add(pipe, counter, p.amount, max(1, math.ceil(p.ttl_s * 1e3)))
            for w in binds:
                store.bind(pipe, w.key, w.value, w.ttl_ms, w.mode, {"key": w.key, "value": w.value, "ttl_ms": w.ttl_ms})
            for channel, message, keep, ms in msgs:
                store.publish(pipe, channel, message)
                if keep is not None:
                    store.keep(pipe, channel, keep, message, ms)
            self.refills.grants(pipe, back)
            if beat:
                store.presence(pipe, max(3.0, 3 * self.presence_s))

        res = await store.run(build) if store.healthy else None
        self._writes += res is not None
        if res is None:
            self.counters.restore(adds)
            self.bindings.restore(binds)
            self.dropped += len(msgs)
            self.kept.owe([(channel, keep) for channel, _, keep, _ in msgs if keep is not None])
            return
        self.counters.flushed(adds, [(float(total), max(0, ms) / 1e3) for total, ms in res[:len(adds)]])
        for w, held in zip(binds, res[len(adds):len(adds) + len(binds)], strict=True):
            self.bindings.confirmed(w, held.decode() if isinstance(held, bytes) else str(held))
        if beat:
            self.replicas, self._next_presence = max(1, int(res[-1])), now + self.presence_s

    async def _refiller(self) -> None:
        while True:
            await self.refills.wanted()
            try:
                await self.refill()
            except Exception:  # a bug here must not stop the refills for good
                log.exception("shared state: refill failed")

    async def _writer(self) -> None:
        while True:
            if not self._wake.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.flush_s):
                        await self._wake.wait()
            self._wake.clear()
            try:
                await self.flush()
            except Exception:  # a bug here must not stop the writes for good
                log.exception("shared state: flush failed")
