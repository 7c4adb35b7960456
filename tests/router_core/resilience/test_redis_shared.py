"""RedisShared against a real redis-server: atomic buckets, counters, bindings, pub/sub, outage and recovery."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from router_core.resilience.redis_shared import RedisShared
from router_core.resilience.shared import MemoryShared
from tests.redis_server import RedisServer, redis_server

__all__ = ["redis_server"]  # the fixture, imported for pytest


async def _until(cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async def wait() -> None:
        while not cond():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), timeout_s)


def _with(server: RedisServer, body: Callable[[RedisShared, RedisShared], Awaitable[None]],
          timeout_s: float = 0.2) -> None:
    async def run() -> None:
        a = RedisShared(server.url, key_prefix="t:", timeout_s=timeout_s, replica_id="a", retry_s=0.05)
        b = RedisShared(server.url, key_prefix="t:", timeout_s=timeout_s, replica_id="b", retry_s=0.05)
        await a.start()
        await b.start()
        try:
            await body(a, b)
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


def test_a_bucket_is_taken_atomically_by_concurrent_replicas(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        # 200 concurrent takes from two clients on a 50-token bucket refilled at 0.001/s: exactly 50 win.
        results = await asyncio.gather(*(s.take("x", 0.001, 50) for _ in range(100) for s in (a, b)))
        assert sum(taken for taken, _ in results) == 50
        waits = [w for taken, w in results if not taken]
        assert len(waits) == 150 and all(w > 0 for w in waits)
        assert a.healthy and b.healthy and a.fallbacks == 0

    _with(redis_server, body, timeout_s=5.0)  # 200 calls at once on a shared 2-core box: no spurious timeout


def test_a_bucket_refills_at_its_rate_and_keeps_a_floor(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert (await a.take("r", 20, 2))[0] and (await b.take("r", 20, 2))[0]
        taken, wait = await a.take("r", 20, 2)
        assert not taken and 0 < wait <= 0.05 + 1e-6
        await asyncio.sleep(wait + 0.02)
        assert (await b.take("r", 20, 2))[0]
        # floor: a token is taken only when `floor` stay behind
        assert (await a.take("f", 0.001, 3, floor=1))[0]
        assert (await a.take("f", 0.001, 3, floor=1))[0]
        assert not (await b.take("f", 0.001, 3, floor=1))[0]
        assert (await b.take("f", 0.001, 3))[0]  # no floor: the reserve is there

    _with(redis_server, body)


def test_counters_add_across_replicas_and_expire(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert await a.add("spend", 1.5, 0.3) == 1.5
        assert await b.add("spend", 2.25, 0.3) == 3.75
        assert await a.get("spend") == 3.75
        assert await b.get("absent") == 0.0
        await asyncio.sleep(0.4)  # the TTL ran from the first add (EXPIRE NX): the second did not renew it
        assert await a.get("spend") == 0.0

    _with(redis_server, body)


def test_bindings_are_set_once_and_rebound(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert await a.bind("session-1", "inst-a", 5) == "inst-a"
        assert await b.bind("session-1", "inst-b", 5) == "inst-a"  # held by a
        await b.rebind("session-1", "inst-b", 5)
        assert await a.bind("session-1", "inst-c", 5) == "inst-b"
        assert await a.bind("short", "x", 0.1) == "x"
        await asyncio.sleep(0.2)
        assert await b.bind("short", "y", 5) == "y"  # expired

    _with(redis_server, body)


def test_messages_reach_the_other_replica_once_and_the_sender_inline(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        got_a: list[dict[str, Any]] = []
        got_b: list[dict[str, Any]] = []
        a.subscribe("breakers", got_a.append)
        b.subscribe("breakers", got_b.append)
        b.subscribe("other", lambda m: got_b.append({"wrong": m}))
        await a.publish("breakers", {"instance": "x", "to": "open"})
        assert got_a == [{"instance": "x", "to": "open"}]  # applied here at once, not again from Redis
        await _until(lambda: bool(got_b))
        assert got_b == [{"instance": "x", "to": "open"}]
        await asyncio.sleep(0.1)
        assert got_a == [{"instance": "x", "to": "open"}]  # its own message, heard back, is skipped

    _with(redis_server, body)


def test_redis_killed_falls_back_locally_then_recovers(redis_server: RedisServer, caplog: pytest.LogCaptureFixture,
                                                       ) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        got_b: list[dict[str, Any]] = []
        b.subscribe("c", got_b.append)
        assert await a.add("n", 1, 60) == 1
        redis_server.stop()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await a.add("n", 1, 60) == 1  # the local counter: Redis's is out of reach
        assert loop.time() - t0 < 0.5  # bounded by the timeout, not the socket's defaults
        assert not a.healthy and a.problem
        assert (await a.take("bucket", 0.001, 1))[0] and not (await a.take("bucket", 0.001, 1))[0]  # local bucket
        assert await a.bind("k", "v", 60) == "v"
        got_a: list[dict[str, Any]] = []
        a.subscribe("c", got_a.append)
        await a.publish("c", {"n": 1})
        assert got_a == [{"n": 1}]  # local handlers still run
        assert a.fallbacks >= 4
        await _until(lambda: not b.healthy)  # b's listener saw the connection drop
        redis_server.start()
        await _until(lambda: a.healthy and b.healthy and a.problem is None)
        await _until(lambda: b._pubsub is not None)
        assert await a.add("fresh", 2, 60) == 2 and await b.get("fresh") == 2  # shared again
        await a.publish("c", {"n": 2})
        await _until(lambda: {"n": 2} in got_b)

    with caplog.at_level(logging.WARNING, logger="router_core.resilience.redis_shared"):
        _with(redis_server, body)
    assert any("unavailable" in r.message for r in caplog.records)
    assert any("reachable again" in r.message for r in caplog.records)


def test_unreachable_at_start_routes_locally_and_says_so() -> None:
    async def run() -> None:
        from app.run.procs import free_port

        s = RedisShared(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.05, retry_s=0.05)
        await s.start()
        try:
            assert not s.healthy and s.problem
            assert (await s.take("b", 1, 1))[0]
        finally:
            await s.close()

    asyncio.run(run())


def test_memory_shared_keeps_a_floor_too() -> None:
    now = [0.0]
    m = MemoryShared(lambda: now[0])
    assert m.take_now("b", 1, 3, floor=1) == (True, 0.0)
    assert m.take_now("b", 1, 3, floor=1) == (True, 0.0)
    taken, wait = m.take_now("b", 1, 3, floor=1)
    assert not taken and wait == pytest.approx(1.0)
    assert m.tokens("b") == pytest.approx(1.0)
