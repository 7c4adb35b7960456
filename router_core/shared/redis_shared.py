""":class:`SharedState` in Redis, for several gateway processes or hosts, without Redis on the request path.

A request never waits on Redis in the common case: each call is answered from local state that
background tasks keep in step with Redis (one round trip per batch, not per request):

- **Token buckets** (:mod:`.redis_lease`): a lease per bucket, tokens taken from the shared bucket
  ahead of need (``rate * lease_s`` at a time) and refilled in the background when half used; an
  empty lease admits on credit (charged at the refill) up to its size; past that a take waits for
  the refill in flight (:mod:`.redis_refill`), at most ``timeout_s``, then decides by the local
  rule below. The shared bucket is overdrawn by at most ``lease size * replicas`` tokens at any time.
- **Counters** (:mod:`.redis_counters`): added locally, flushed every ``flush_s`` in one pipeline;
  a total is the last flushed (or read) shared total plus this replica's pending adds. A new
  (restarted, empty) Redis gets the last totals known back, max semantics (:mod:`.redis_totals`).
- **Bindings** (:mod:`.redis_bindings`): read from a local mirror, filled from Redis at start
  (:mod:`.redis_warm`) and kept current by the other replicas' published bindings; written in the
  background at the flush.
- **Messages** (breaker transitions): applied here at once, sent at once in the background; ``keep``:
  also a state that replicas starting or reconnecting read (:mod:`.redis_kept`: open breakers).
- **Claims**: ``SET NX`` awaited, held here too, written again when Redis is back (:mod:`.redis_claims`).
- **Replicas**: each beats in a presence set every ``presence_s``; ``replicas`` is how many beat
  (until a heartbeat is answered: the count expected, ``serve``'s workers).

**Redis down** (a call failed or timed out, ``healthy`` False, ``problem`` says why): leases are
dropped and a take is decided by this process's own bucket of ``rate / replicas`` and ``burst /
replicas`` (the last replica count known, else the count expected), so the replicas together admit
about what the shared bucket would; counters and bindings keep accumulating locally and are written
once Redis is back; messages are applied here only; claims are this replica's own. ``fallbacks``
counts the calls answered so. At each connection (start, end of an outage), before Redis is in use,
owed claims and kept messages are written (on a new server: the counters' known totals too, every
claim held and kept message alive) and the other replicas' kept messages read (:meth:`_sync`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio.client import Pipeline

from router_core.aio import cancel_all
from router_core.shared.base import Handler, MemoryShared
from router_core.shared.redis_background import RedisBackground
from router_core.shared.redis_bindings import BindingMirror
from router_core.shared.redis_claims import Reclaims
from router_core.shared.redis_counters import CounterBatch
from router_core.shared.redis_kept import KeptMessages
from router_core.shared.redis_lease import BucketLeases
from router_core.shared.redis_refill import LeaseRefills
from router_core.shared.redis_store import RedisStore
from router_core.shared.redis_totals import restore_totals
from router_core.shared.redis_warm import read_bindings

__all__ = ["RedisShared"]

log = logging.getLogger(__name__)
_BIND_CHANNEL = "_bind"  # the bindings' own channel (not handed to subscribers)


class RedisShared(RedisBackground):
    """:class:`SharedState` in Redis, served from local leases, batches and mirrors (module docstring).

    The refill and write rounds, and the tasks that run them, are its base :class:`RedisBackground`.

    Args:
        url: ``redis://host:port/db``.
        key_prefix: Prepended to every key and channel (several RouteLens deployments on one Redis).
        timeout_s: Bound of every Redis call, and of a take's wait for a refill.
        replica_id: This process's id in messages and the presence set (default: random).
        retry_s: Pause between reconnection attempts while unhealthy.
        max_connections: Connections to Redis of this process (the subscription's included).
        clock: Monotonic seconds (leases, counters' and bindings' expiry, the local fallback).
        flush_s: Interval of the background writes (counters, bindings, presence).
        lease_s: Seconds of a bucket's rate one lease holds.
        presence_s: Interval of this replica's heartbeat.
        replicas: The replicas expected (``serve``'s workers): the count until a heartbeat is answered,
            so a Redis unreachable from the start splits each bucket among them.
    """

    backend = "redis"

    def __init__(self, url: str, *, key_prefix: str = "routelens:", timeout_s: float = 0.05,
                 replica_id: str | None = None, retry_s: float = 0.5, max_connections: int = 64,
                 clock: Callable[[], float] = time.monotonic, flush_s: float = 0.05, lease_s: float = 0.1,
                 presence_s: float = 1.0, replicas: int = 1) -> None:
        self.url, self.timeout_s, self.flush_s, self.presence_s = url, timeout_s, flush_s, presence_s
        self.store = RedisStore(url, key_prefix=key_prefix, timeout_s=timeout_s, replica_id=replica_id,
                                retry_s=retry_s, max_connections=max_connections, on_message=self._received,
                                on_health=self._health, on_sync=self._sync)
        self._clock = clock
        self.local = MemoryShared(clock)
        self.leases = BucketLeases(clock, lease_s=lease_s)
        self.refills = LeaseRefills(self.store, self.leases, lambda: self.replicas, timeout_s)
        self.counters = CounterBatch(clock)
        self.bindings = BindingMirror(clock)
        self.kept = KeptMessages(self.store, clock)
        self.reclaims = Reclaims(self.store, self.local, lambda key: self.store.key("claim", key))
        self.replicas = max(1, replicas)  # replicas alive, as of the last heartbeat answered (else as expected)
        self.fallbacks = 0  # calls answered by local state because Redis was down or did not answer in time
        self.dropped = 0  # messages not sent (Redis down)
        self.totals_restored = 0  # counters' totals written into a new (restarted, empty) Redis
        self._writes = 0  # write rounds that reached Redis
        self._outbox: list[tuple[str, dict[str, Any], str | None, int]] = []  # channel, message, keep, its ms
        self._handlers: dict[str, list[Handler]] = {}
        self._wake = asyncio.Event()
        self._next_presence = self._next_sweep = -math.inf
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def replica_id(self) -> str:
        """This process's id among the replicas."""
        return self.store.replica_id

    @property
    def healthy(self) -> bool:
        """False while Redis is unreachable (state is then this process's own)."""
        return self.store.healthy

    @property
    def problem(self) -> str | None:
        """Why Redis is not in use (None: it is)."""
        return self.store.problem

    @property
    def rounds(self) -> int:
        """Round trips to Redis: refills and flushes."""
        return self.refills.rounds + self._writes

    @property
    def waits(self) -> int:
        """Takes that waited for a refill (lease and credit used up)."""
        return self.refills.waits

    async def start(self) -> None:
        """Connect, beat once (the replica count), start the background tasks (call on the running loop)."""
        if self._tasks:
            return
        await self.store.start()
        if self.store.healthy:
            await self.flush()
        self._tasks += [asyncio.create_task(self._refiller(), name="redis-shared-refill"),
                        asyncio.create_task(self._writer(), name="redis-shared-write"),
                        asyncio.create_task(self._warm(), name="redis-shared-warm")]

    async def _warm(self) -> None:
        """Read the bindings Redis holds into the mirror (:func:`~router_core.shared.redis_warm.read_bindings`)."""
        try:
            await read_bindings(self.store, self.bindings)
        except Exception as exc:  # Redis went away meanwhile: the mirror fills as sessions come
            log.info("shared state: bindings not read at start (%s)", type(exc).__name__)

    # -- the request path: local answers ----------------------------------------------------------

    async def take(self, bucket: str, rate: float, burst: float, *, floor: float = 0.0) -> tuple[bool, float]:
        """Take one token from the bucket's lease (module docstring: credit, waiting, the local rule)."""
        if self.store.healthy and (got := await self.refills.take(bucket, rate, burst, floor)) is not None:
            return got
        self.fallbacks += 1
        n = max(1, self.replicas)
        return self.local.take_now(bucket, rate / n, max(1.0, burst / n), floor=floor / n)

    def tokens(self, bucket: str) -> float | None:
        """Redis's tokens after this replica's last refill, plus its lease's (Redis down: the local fallback's)."""
        return self.leases.tokens(bucket) if self.store.healthy else self.local.tokens(bucket)

    async def add(self, counter: str, amount: float, ttl_s: float) -> float:
        """Add locally (flushed in the background); the total as known: last flushed plus pending."""
        if not self.store.healthy:
            self.fallbacks += 1
        return self.counters.add(counter, amount, ttl_s)

    async def get(self, counter: str) -> float:
        """The shared total read from Redis now plus the pending adds (Redis down: the last known); for refreshes."""
        key = self.store.key("counter", counter)

        def build(pipe: Pipeline) -> None:
            pipe.get(key)
            pipe.pttl(key)

        res = await self.store.run(build)
        if res is None:
            self.fallbacks += 1
        else:
            self.counters.learned(counter, float(res[0] or 0.0), res[1] / 1e3 if res[1] > 0 else 0.0)
        return self.counters.total(counter)

    async def bind(self, key: str, value: str, ttl_s: float) -> str:
        """What the mirror holds for ``key`` (TTL renewed), else ``value``; written to Redis in the background."""
        if not self.store.healthy:
            self.fallbacks += 1
        return self.bindings.bind(key, value, ttl_s)

    async def rebind(self, key: str, value: str, ttl_s: float) -> None:
        """Overwrite in the mirror now, in Redis (and the other replicas' mirrors) at the next flush."""
        if not self.store.healthy:
            self.fallbacks += 1
        self.bindings.rebind(key, value, ttl_s)

    def held(self, key: str) -> str | None:
        """What the mirror holds for ``key`` (what :meth:`bind` answers from); nothing queued."""
        return self.bindings.get(key)

    async def claim(self, key: str, ttl_s: float) -> bool:
        """``SET key NX PX`` in Redis, awaited (within ``timeout_s``); while Redis is down, this replica's own."""
        if not await self.local.claim(key, ttl_s):  # claimed here already: no round trip
            return False
        name, ms = self.store.key("claim", key), max(1, int(ttl_s * 1e3))
        took = await self.store.call(lambda: self.store.client.set(name, self.store.replica_id, nx=True, px=ms))
        if took is None and not self.store.healthy:
            self.fallbacks += 1
            self.reclaims.owed.add(key)  # written at the next connection
            return True  # Redis unreachable: this replica's claim stands
        if not took:  # another replica's: Redis keeps the answer (and gives it back on unclaim)
            await self.local.unclaim(key)
        return bool(took)

    async def unclaim(self, key: str) -> None:
        """Delete the claim here and in Redis."""
        await self.local.unclaim(key)
        self.reclaims.owed.discard(key)
        name = self.store.key("claim", key)
        await self.store.call(lambda: self.store.client.delete(name))

    async def publish(self, channel: str, message: dict[str, Any], *, keep: str | None = None,
                      keep_s: float = 0.0) -> None:
        """Apply ``message`` here at once; send it to the other replicas in the background (now); ``keep``: kept too."""
        self._dispatch(channel, message)
        ms = 0 if keep is None else self.kept.note(channel, keep, message, keep_s, owed=not self.store.healthy)
        if not self.store.healthy:
            self.fallbacks += 1
            self.dropped += 1
            return
        self._outbox.append((channel, message, keep, ms))
        self._wake.set()

    def subscribe(self, channel: str, handler: Handler) -> None:
        """Call ``handler`` with each message published on ``channel`` (by any replica)."""
        self._handlers.setdefault(channel, []).append(handler)

    def _dispatch(self, channel: str, message: dict[str, Any]) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(message)
            except Exception:  # one handler's bug must not stop the others or the listener
                log.exception("shared state: handler of %s failed", channel)

    def _received(self, channel: str, message: dict[str, Any]) -> None:
        if channel != _BIND_CHANNEL:
            self._dispatch(channel, message)
        elif isinstance(key := message.get("key"), str) and isinstance(value := message.get("value"), str):
            self.bindings.learned(key, value, int(message.get("ttl_ms") or 1))

    async def _sync(self, new_server: bool) -> None:
        """A connection (at start, after an outage), before Redis is in use: write what is owed, read what is kept."""
        if new_server and self.store.server_id is not None:
            log.warning("shared state: Redis at %s is a new server; writing this replica's counters' totals and "
                        "claims again", self.url)
        if new_server:  # before the owed adds (the next flush), though the order does not matter to the counts
            self.totals_restored += await restore_totals(self.store, self.counters)
        for channel, message in await self.kept.sync(new_server, self._handlers):
            self._dispatch(channel, message)
        await self.reclaims.sync(new_server)  # last: nothing awaited between its end and Redis in use

    def _health(self, healthy: bool) -> None:
        """Redis went away or came back: what it lent is dropped either way, and waiting takes let go."""
        self.refills.reset()

    async def close(self) -> None:
        """Stop the background, write what is pending and give the leases back (if Redis is there), disconnect."""
        await cancel_all(self._tasks)
        with contextlib.suppress(Exception):
            await self.flush(release=True)
        await self.store.close()

    def stats(self) -> dict[str, float]:
        """Counts for metrics and the bench: credit, overdrafts, round trips, waits, conflicts, fallbacks."""
        return {"replicas": self.replicas, "credited": self.leases.credited, "overdrawn": self.leases.overdrawn,
                "rounds": self.rounds, "waits": self.waits, "flushes": self.counters.flushes,
                "fallbacks": self.fallbacks, "bind_conflicts": self.bindings.conflicts,
                "dropped_messages": self.dropped, "claims_rewritten": self.reclaims.written,
                "claim_conflicts": self.reclaims.conflicts, "totals_restored": self.totals_restored}
