"""The Redis side of :class:`router_core.shared.redis_shared.RedisShared`: connections, health, scripts.

Every call is bounded by ``timeout_s``. A call that fails or times out marks the store unhealthy
(``healthy`` False, ``problem`` says why, one warning logged); calls that follow return None at
once, without trying, until a background ``PING`` (every ``retry_s``) succeeds again.

Work goes in pipelines (:meth:`RedisStore.run`), one round trip each, of these commands:

- :meth:`grant`: a lease refill (one Lua script, atomic, on the server's clock ``TIME`` so the
  replicas' clocks do not matter): charge a debt (negative: give tokens back), then take up to
  ``want`` tokens above ``floor``. A hash ``{t: tokens, at: seconds}`` expiring once full again.
- :meth:`add`: ``INCRBYFLOAT`` then ``PEXPIRE .. NX`` (the TTL runs from creation).
- :meth:`restore`: a counter's total known from a server before, written into a new one (the largest
  total restored, plus the adds made on the new server: each counted once, in any order).
- :meth:`bind`: ``SET NX PX`` (publishing the binding when it was set), else ``GETEX PX``.
- :meth:`publish`: JSON carrying this replica's id; one pattern subscription hands the other
  replicas' messages to ``on_message`` (this replica's own are skipped).
- :meth:`presence`: this replica's heartbeat in a sorted set; answers how many are alive.
- :meth:`keep`: a message kept as a channel's state under a key, for a TTL (a field of the channel's
  hash, its expiry on the server's clock; deleted when the state ends); :meth:`kept` reads them.

Scripts are loaded once (and again after an outage) and called by SHA. Each connection, at start
and after an outage, runs ``on_sync`` before the store counts as healthy, told whether the server is
a new one: the id Redis holds under ``server:id`` (set by the first replica that finds none) is not
the one last seen, so Redis lost its data (restarted empty, flushed, failed over) or this is the first.
The scripts' Lua is in :mod:`router_core.shared.redis_scripts`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline, PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError

from router_core.aio import cancel_all
from router_core.shared.redis_scripts import SCRIPTS

__all__ = ["RedisStore"]

log = logging.getLogger("router_core.shared.redis_shared")

T = TypeVar("T")


class RedisStore:
    """One process's connection to Redis (see the module docstring).

    Args:
        url: ``redis://host:port/db``.
        key_prefix: Prepended to every key and channel.
        timeout_s: Bound of every call (connection included).
        replica_id: This process's id in messages and the presence set.
        retry_s: Pause between reconnection attempts while unhealthy.
        max_connections: Connections of this process (the subscription's included).
        on_message: ``(channel, message)`` of each message another replica published.
        on_health: Called with the new value each time ``healthy`` changes.
        on_sync: Awaited on each connection (at start, after an outage) before the store counts as
            healthy, with True when the server is new (another ``server_id``); its calls pass
            ``anyway``; when it raises (or a call fails), the store stays down and tries again later.
    """

    def __init__(self, url: str, *, key_prefix: str, timeout_s: float, replica_id: str | None = None,
                 retry_s: float = 0.5, max_connections: int = 64,
                 on_message: Callable[[str, dict[str, Any]], None] = lambda c, m: None,
                 on_health: Callable[[bool], None] = lambda h: None,
                 on_sync: Callable[[bool], Awaitable[None]] | None = None) -> None:
        self.url, self.prefix, self.timeout_s, self.retry_s = url, key_prefix, timeout_s, retry_s
        self.replica_id = replica_id or uuid.uuid4().hex[:12]
        self.on_message, self.on_health, self.on_sync = on_message, on_health, on_sync
        self.server_id: str | None = None  # the data's id in Redis, as of the last sync that went through
        self._healthy: bool = True
        self._problem: str | None = None
        # A blocking pool: a burst of calls queues for a connection (within the timeout) rather than
        # failing on "too many connections" and marking a healthy Redis down.
        self._pool = pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=timeout_s, socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0), health_check_interval=0)
        self.client = aioredis.Redis(connection_pool=pool)
        self._sha: dict[str, str] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._pubsub: PubSub | None = None

    @property
    def healthy(self) -> bool:
        """False while Redis is unreachable."""
        return self._healthy

    @property
    def problem(self) -> str | None:
        """Why Redis is not in use (None: it is)."""
        return self._problem

    def key(self, kind: str, name: str) -> str:
        """The Redis key of ``name`` of ``kind`` (``bucket``, ``counter``, ``bind``, ``ch``...)."""
        return f"{self.prefix}{kind}:{name}"

    async def start(self) -> None:
        """Connect, load the scripts and listen (call on the running loop); unhealthy if Redis is not there."""
        if self._tasks:
            return
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            await self._connect(max(self.timeout_s, 1.0))  # first connection: a little slack
        if self._pubsub is None or self.server_id is None:
            self._down("not reachable at start")
        self._tasks.append(asyncio.create_task(self._watch(), name="redis-shared-watch"))

    async def _load(self) -> None:
        for name, body in SCRIPTS.items():
            self._sha[name] = await self.client.script_load(body)

    async def _connect(self, within_s: float) -> None:
        """Load the scripts and listen (within ``within_s``), then sync; raises when Redis does not answer."""
        async with asyncio.timeout(within_s):
            pipe = self.client.pipeline(transaction=False)
            pipe.set(self.key("server", "id"), uuid.uuid4().hex, nx=True)  # Redis empty: a new id
            pipe.get(self.key("server", "id"))
            held = (await pipe.execute())[1]
            server_id = held.decode() if isinstance(held, bytes) else str(held)
            await self._load()  # a restarted Redis has no scripts
            if self._pubsub is None:
                await self._listen_start()
        if self.on_sync is not None:
            try:  # its calls are bounded each
                await self.on_sync(server_id != self.server_id)
            except (RedisError, OSError, TimeoutError):
                raise
            except Exception:  # a bug there must not keep Redis out of use for good
                log.exception("shared state: sync with Redis failed")
        self.server_id = server_id  # only once synced: a sync that failed is done again in full

    async def call(self, make: Callable[[], Awaitable[T]], *, anyway: bool = False) -> T | None:
        """Run one call within the timeout; None when Redis is down or the call fails (then marked down).

        ``anyway``: try even while down (the sync of a connection, before the store counts as healthy).
        """
        if not (self._healthy or anyway):
            return None
        try:
            async with asyncio.timeout(self.timeout_s):
                return await make()
        except (RedisError, OSError, TimeoutError) as exc:
            self._down(f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} after "
                       f"{self.timeout_s * 1e3:.0f} ms")
            return None

    async def run(self, build: Callable[[Pipeline], None], *, anyway: bool = False) -> list[Any] | None:
        """One pipeline that ``build`` fills, in one round trip (scripts reloaded once if Redis lost them)."""
        async def execute() -> list[Any]:
            for attempt in (0, 1):
                pipe = self.client.pipeline(transaction=False)
                build(pipe)
                try:
                    return list(await pipe.execute())
                except NoScriptError:
                    if attempt:
                        raise
                    await self._load()
            raise AssertionError("unreachable")

        return await self.call(execute, anyway=anyway)

    def grant(self, pipe: Pipeline, bucket: str, rate: float, burst: float, floor: float, debt: int,
              want: int) -> None:
        """Queue a lease refill; its answer reads with :meth:`granted`."""
        pipe.evalsha(self._sha["grant"], 1, self.key("bucket", bucket), rate, burst, floor, debt, want)

    @staticmethod
    def granted(res: Any) -> tuple[int, float, float]:
        """``(tokens granted, seconds until one more is there, tokens left)``."""
        return int(res[0]), float(res[1]), float(res[2])

    def add(self, pipe: Pipeline, counter: str, amount: float, ttl_ms: int) -> None:
        """Queue a counter add; its answer is ``[total, ms left]``."""
        pipe.evalsha(self._sha["add"], 2, self.key("counter", counter), self.key("restored", counter), amount, ttl_ms)

    def restore(self, pipe: Pipeline, counter: str, total: float, left_ms: int) -> None:
        """Queue a counter's ``total`` known from the server before (``left_ms`` of its TTL left).

        Max semantics: the counter becomes the larger of the totals restored, plus the adds made since.
        Answer: ``[total, ms left]``.
        """
        pipe.evalsha(self._sha["restore"], 2, self.key("counter", counter), self.key("restored", counter),
                     float(total), max(1, left_ms))

    def bind(self, pipe: Pipeline, key: str, value: str, ttl_ms: int, mode: str, message: dict[str, Any]) -> None:
        """Queue a binding write (``message`` published on ``_bind`` when it set the key); answer: the value held."""
        pipe.evalsha(self._sha["bind"], 1, self.key("bind", key), value, ttl_ms, mode, self.key("ch", "_bind"),
                     self._payload(message))

    def publish(self, pipe: Pipeline, channel: str, message: dict[str, Any]) -> None:
        """Queue a message to the other replicas."""
        pipe.publish(self.key("ch", channel), self._payload(message))

    def presence(self, pipe: Pipeline, stale_s: float) -> None:
        """Queue this replica's heartbeat; answer: the replicas alive."""
        pipe.evalsha(self._sha["presence"], 1, self.key("replicas", "alive"), self.replica_id, stale_s)

    def keep(self, pipe: Pipeline, channel: str, key: str, message: dict[str, Any] | None, ttl_ms: int, *,
             left_ms: int | None = None, nx: bool = False) -> None:
        """Queue ``message`` as ``channel``'s state under ``key`` (None or ``ttl_ms`` 0: none there any more).

        It expires after ``left_ms`` (default ``ttl_ms``: the TTL it was kept with, which its age is read
        against); ``nx``: unless one is held. Answer: 1 written, 0 not.
        """
        left = ttl_ms if left_ms is None else left_ms
        payload = b"" if message is None else orjson.dumps({"from": self.replica_id, "message": message,
                                                             "ttl_ms": ttl_ms})
        pipe.evalsha(self._sha["keep"], 1, self.key("kept", channel), key, payload,
                     left if message is not None and ttl_ms > 0 else 0, "1" if nx else "0")

    def kept(self, pipe: Pipeline, channel: str) -> None:
        """Queue the read of ``channel``'s kept messages; answer: ``[key, payload, ms left, ...]``."""
        pipe.evalsha(self._sha["kept"], 1, self.key("kept", channel))

    def _payload(self, message: dict[str, Any]) -> bytes:
        return orjson.dumps({"from": self.replica_id, "message": message})

    def _down(self, problem: str) -> None:
        if self._healthy:
            log.warning("shared state: Redis at %s unavailable (%s); routing on this process's own state", self.url,
                        problem)
            self._healthy, self._problem = False, problem
            self.on_health(False)
        self._problem = problem

    async def _listen_start(self) -> None:
        """Subscribe and start the listener; returns once Redis has confirmed the subscription (callers bound it).

        ``psubscribe`` only sends the command. Without the confirmation, a message this replica's peers
        publish right after ``start()`` returned (a breaker's transition, in-flight counts) could reach
        Redis before the subscription does, and be lost: Redis keeps no message for a later subscriber.
        """
        pubsub = self.client.pubsub()  # not ignore_subscribe_messages: it would hide the confirmation too
        await pubsub.psubscribe(self.key("ch", "*"))
        while True:
            msg = await pubsub.get_message(ignore_subscribe_messages=False, timeout=None)
            if msg is not None and msg.get("type") == "psubscribe":
                break
        self._pubsub = pubsub
        self._tasks.append(asyncio.create_task(self._listen(pubsub), name="redis-shared-listen"))

    async def _listen(self, pubsub: PubSub) -> None:
        """Hand the other replicas' messages over until the connection drops (the watcher restarts it)."""
        skip = len(self.key("ch", ""))
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
                self.on_message(msg["channel"].decode()[skip:], data.get("message") or {})
        except (RedisError, OSError) as exc:
            self._down(f"subscription lost: {type(exc).__name__}: {exc}")
        finally:
            if self._pubsub is pubsub:
                self._pubsub = None
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8 on

    async def _watch(self) -> None:
        """While unhealthy, ``PING`` every ``retry_s``; when Redis answers, reload, resubscribe and use it again."""
        while True:
            await asyncio.sleep(self.retry_s)
            if self._healthy and self._pubsub is not None:
                continue
            try:
                if not self._healthy:  # idle connections from before the outage are dead: the first
                    await self._pool.disconnect(inuse_connections=False)  # request on one would fail
                async with asyncio.timeout(max(self.timeout_s, 0.5)):
                    await self.client.ping()
                await self._connect(max(self.timeout_s, 0.5))
            except (RedisError, OSError, TimeoutError) as exc:
                self._down(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
                continue
            if not self._healthy:
                log.warning("shared state: Redis at %s reachable again; shared state in use", self.url)
                self._healthy, self._problem = True, None
                self.on_health(True)

    async def close(self) -> None:
        """Stop listening and close the connections."""
        await cancel_all(self._tasks)
        with contextlib.suppress(Exception):
            await self.client.aclose()
        with contextlib.suppress(Exception):
            await self._pool.disconnect()  # a pool passed in is not closed by the client
