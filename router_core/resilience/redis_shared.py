""":class:`SharedState` in Redis, for several gateway processes or hosts.

Every call is bounded by ``timeout_s`` (50 ms by default). A call that fails or times out marks
the store unhealthy (``healthy`` False, ``problem`` says why, one warning logged) and is answered
by a local :class:`MemoryShared`; so are the calls that follow, without trying Redis, until a
background task's ``PING`` succeeds again. Routing never waits on a Redis that is down.

- Token buckets: one Lua script (atomic; the server's clock, ``TIME``, so replicas' clocks do not
  matter), a hash ``{t: tokens, at: seconds}`` expiring once it would be full again.
- Counters: ``INCRBYFLOAT`` then ``PEXPIRE .. NX`` in one script (the TTL runs from creation).
- Bindings: ``SET NX PX`` then ``GETEX PX`` in one transaction (what is held, TTL renewed).
- Messages: ``PUBLISH`` of JSON carrying this replica's id; one pattern subscription applies the
  other replicas' messages to the local handlers (this replica's own were applied when sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import orjson
import redis.asyncio as aioredis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from router_core.resilience.shared import Handler, MemoryShared, SharedState
from schemas.shared_config import SharedSettings

__all__ = ["RedisShared", "SharedCollector", "build_shared"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# KEYS[1] bucket; ARGV rate, burst, floor -> {taken 0|1, wait seconds, tokens left} (floats as strings:
# a Lua number reaches the client as an integer).
_TAKE = """
local rate, burst, floor = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 't', 'at')
local tokens, at = tonumber(held[1]), tonumber(held[2])
if tokens == nil or at == nil then tokens, at = burst, now end
if now > at then tokens = math.min(burst, tokens + (now - at) * rate); at = now end
local taken, wait = 0, 0
if tokens - 1 >= floor then tokens = tokens - 1; taken = 1 else wait = (1 + floor - tokens) / rate end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'at', tostring(at))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {taken, tostring(wait), tostring(tokens)}
"""


# KEYS[1] counter; ARGV amount, ttl ms -> the new total (as a string). The TTL is set at creation only.
_ADD = """
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2], 'NX')
return total
"""


class RedisShared:
    """:class:`SharedState` in Redis, with a local fallback while Redis is unreachable.

    Args:
        url: ``redis://host:port/db``.
        key_prefix: Prepended to every key and channel (several RouteLens deployments on one Redis).
        timeout_s: Bound of every call (connection included).
        replica_id: This process's id in published messages (default: random).
        retry_s: Pause between reconnection attempts while unhealthy.
        max_connections: Connections to Redis of this process (the subscription's included).
        clock: Monotonic seconds for the local fallback.
    """

    backend = "redis"

    def __init__(self, url: str, *, key_prefix: str = "routelens:", timeout_s: float = 0.05,
                 replica_id: str | None = None, retry_s: float = 0.5, max_connections: int = 64,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.prefix = key_prefix
        self.timeout_s = timeout_s
        self.replica_id = replica_id or uuid.uuid4().hex[:12]
        self.retry_s = retry_s
        self.local = MemoryShared(clock)
        self.fallbacks = 0  # calls answered locally because Redis failed or was down
        self._healthy = True
        self._problem: str | None = None
        self._handlers: dict[str, list[Handler]] = {}
        # A blocking pool: a burst of concurrent requests queues for a connection (within the timeout)
        # rather than failing on "too many connections" and marking a healthy Redis down.
        self._pool = pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=timeout_s, socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0), health_check_interval=0)
        self._client = aioredis.Redis(connection_pool=pool)
        self._take = self._client.register_script(_TAKE)
        self._add = self._client.register_script(_ADD)  # one round trip, less client work than MULTI/EXEC
        self._tasks: list[asyncio.Task[None]] = []
        self._pubsub: PubSub | None = None

    @property
    def healthy(self) -> bool:
        """False while Redis is unreachable (state is then this process's own)."""
        return self._healthy

    @property
    def problem(self) -> str | None:
        """Why Redis is not in use (None: it is)."""
        return self._problem

    async def start(self) -> None:
        """Check the connection and start listening to the other replicas (call on the running loop)."""
        if not self._tasks:
            with contextlib.suppress(RedisError, OSError, TimeoutError):
                async with asyncio.timeout(max(self.timeout_s, 1.0)):  # first connection: a little slack
                    await self._client.ping()
                    await self._listen_start()
            if self._pubsub is None:
                self._down("not reachable at start")
            self._tasks.append(asyncio.create_task(self._watch(), name="redis-shared-watch"))

    def _key(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    async def _call(self, make: Callable[[], Awaitable[T]]) -> T | None:
        """Run one Redis call within the timeout; None when Redis is down or the call fails."""
        if not self._healthy:
            self.fallbacks += 1
            return None
        try:
            async with asyncio.timeout(self.timeout_s):
                return await make()
        except (RedisError, OSError, TimeoutError) as exc:
            self._down(f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} after "
                       f"{self.timeout_s * 1e3:.0f} ms")
            self.fallbacks += 1
            return None

    def _down(self, problem: str) -> None:
        if self._healthy:
            log.warning("shared state: Redis at %s unavailable (%s); routing on this process's own state", self.url,
                        problem)
        self._healthy, self._problem = False, problem

    async def take(self, bucket: str, rate: float, burst: float, *, floor: float = 0.0) -> tuple[bool, float]:
        """Take one token from the shared bucket (the local one while Redis is down)."""
        res = await self._call(lambda: self._take(keys=[self._key("bucket", bucket)], args=[rate, burst, floor]))
        if res is None:
            return self.local.take_now(bucket, rate, burst, floor=floor)
        return bool(res[0]), float(res[1])

    async def add(self, counter: str, amount: float, ttl_s: float) -> float:
        """``INCRBYFLOAT`` with the TTL set at creation only."""
        key, ms = self._key("counter", counter), max(1, math.ceil(ttl_s * 1e3))
        res = await self._call(lambda: self._add(keys=[key], args=[amount, ms]))
        if res is None:
            return await self.local.add(counter, amount, ttl_s)
        return float(res)

    async def get(self, counter: str) -> float:
        """The counter's value (0 when absent or expired)."""
        key = self._key("counter", counter)
        res = await self._call(lambda: self._client.get(key))
        if res is None:
            return await self.local.get(counter) if not self._healthy else 0.0
        return float(res)

    async def bind(self, key: str, value: str, ttl_s: float) -> str:
        """Set if absent, then read what is held with the TTL renewed."""
        k, ms = self._key("bind", key), max(1, math.ceil(ttl_s * 1e3))

        async def run() -> Any:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.set(k, value, nx=True, px=ms)
                pipe.getex(k, px=ms)
                return await pipe.execute()

        res = await self._call(run)
        if res is None or res[1] is None:
            return await self.local.bind(key, value, ttl_s)
        held: bytes = res[1]
        return held.decode()

    async def rebind(self, key: str, value: str, ttl_s: float) -> None:
        """Overwrite."""
        k = self._key("bind", key)
        if await self._call(lambda: self._client.set(k, value, px=max(1, math.ceil(ttl_s * 1e3)))) is None:
            await self.local.rebind(key, value, ttl_s)

    async def publish(self, channel: str, message: dict[str, Any]) -> None:
        """Apply ``message`` here at once, then send it to the other replicas."""
        self._dispatch(channel, message)
        data = orjson.dumps({"from": self.replica_id, "message": message})
        await self._call(lambda: self._client.publish(self._key("ch", channel), data))

    def subscribe(self, channel: str, handler: Handler) -> None:
        """Call ``handler`` with each message published on ``channel`` (by any replica)."""
        self._handlers.setdefault(channel, []).append(handler)

    def _dispatch(self, channel: str, message: dict[str, Any]) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(message)
            except Exception:  # one handler's bug must not stop the others or the listener
                log.exception("shared state: handler of %s failed", channel)

    async def _listen_start(self) -> None:
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        await pubsub.psubscribe(self._key("ch", "*"))
        self._pubsub = pubsub
        self._tasks.append(asyncio.create_task(self._listen(pubsub), name="redis-shared-listen"))

    async def _listen(self, pubsub: PubSub) -> None:
        """Apply the other replicas' messages until the connection drops (the watcher restarts it)."""
        skip = len(self._key("ch", ""))
        try:
            while True:
                msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if msg is None or msg.get("type") != "pmessage":
                    continue
                try:
                    data = orjson.loads(msg["data"])
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(data, dict) or data.get("from") == self.replica_id:
                    continue
                self._dispatch(msg["channel"].decode()[skip:], data.get("message") or {})
        except (RedisError, OSError) as exc:
            self._down(f"subscription lost: {type(exc).__name__}: {exc}")
        finally:
            if self._pubsub is pubsub:
                self._pubsub = None
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _watch(self) -> None:
        """While unhealthy, ``PING`` every ``retry_s``; when Redis answers, resubscribe and use it again."""
        while True:
            await asyncio.sleep(self.retry_s)
            if self._healthy and self._pubsub is not None:
                continue
            try:
                async with asyncio.timeout(max(self.timeout_s, 0.5)):
                    if not self._healthy:  # idle connections from before the outage are dead: the first
                        await self._pool.disconnect(inuse_connections=False)  # request on one would fail
                    await self._client.ping()
                    if self._pubsub is None:
                        await self._listen_start()
            except (RedisError, OSError, TimeoutError) as exc:
                self._down(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
                continue
            if not self._healthy:
                log.warning("shared state: Redis at %s reachable again; shared state in use", self.url)
            self._healthy, self._problem = True, None

    async def close(self) -> None:
        """Stop listening and close the connections."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        with contextlib.suppress(Exception):
            await self._client.aclose()
        with contextlib.suppress(Exception):
            await self._pool.disconnect()  # a pool passed in is not closed by the client


class SharedCollector(Collector):
    """``routelens_shared_healthy`` and ``routelens_shared_fallbacks_total`` of one :class:`SharedState`."""

    def __init__(self, shared: SharedState) -> None:
        self._shared = shared

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Read the state's health and fallback count at scrape time."""
        backend = str(getattr(self._shared, "backend", "memory"))
        healthy = GaugeMetricFamily("routelens_shared_healthy",
                                    "1 while the shared state store is reachable (0: routing on local state).",
                                    labels=["backend"])
        healthy.add_metric([backend], 1.0 if self._shared.healthy else 0.0)
        yield healthy
        fallbacks = CounterMetricFamily("routelens_shared_fallbacks",
                                        "Shared-state calls answered by local state (Redis failed or down).",
                                        labels=["backend"])
        fallbacks.add_metric([backend], float(getattr(self._shared, "fallbacks", 0)))
        yield fallbacks


def build_shared(settings: SharedSettings, *, clock: Callable[[], float] = time.monotonic) -> SharedState:
    """The configured :class:`SharedState`: a :class:`MemoryShared`, or a :class:`RedisShared` (call its ``start``)."""
    if settings.backend == "redis":
        return RedisShared(settings.url, key_prefix=settings.key_prefix, timeout_s=settings.timeout_ms / 1e3,
                           clock=clock)
    return MemoryShared(clock)
