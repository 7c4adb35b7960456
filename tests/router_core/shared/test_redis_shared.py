"""RedisShared against a real redis-server: leased buckets, batched counters, mirrored bindings, pub/sub, outage."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from app.run.procs import free_port
from router_core.shared.base import MemoryShared
from router_core.shared.redis_lease import lease_size
from router_core.shared.redis_shared import RedisShared
from tests.redis_server import RedisServer, redis_server
from tests.router_core.shared.redis_pair import QUIET, run_pair, until

__all__ = ["redis_server"]  # the fixture, imported for pytest


def _settled(*shared: RedisShared) -> Callable[[], bool]:
    """True once no refill is due or in flight on any of ``shared``."""
    return lambda: all(not s.leases.due and not any(x.in_flight for x in s.leases.leases.values()) for s in shared)


def _with(server: RedisServer, body: Callable[[RedisShared, RedisShared], Awaitable[None]],
          timeout_s: float = 0.2) -> None:
    run_pair(server.url, body, beat_again=True, **QUIET, timeout_s=timeout_s)


async def _grant(s: RedisShared, bucket: str, rate: float, burst: float, floor: float, debt: int,
                 want: int) -> tuple[int, float, float]:
    def build(pipe: Pipeline) -> None:
        s.store.grant(pipe, bucket, rate, burst, floor, debt, want)

    res = await s.store.run(build)
    assert res is not None
    return s.store.granted(res[0])


def test_a_grant_is_atomic_across_replicas(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        # 200 concurrent grants of one token on a 50-token bucket refilled at 0.001/s: exactly 50 win.
        results = await asyncio.gather(*(_grant(s, "x", 0.001, 50, 0.0, 0, 1) for _ in range(100) for s in (a, b)))
        assert sum(granted for granted, _, _ in results) == 50
        assert all(wait > 0 for granted, wait, _ in results if not granted)

    _with(redis_server, body, timeout_s=5.0)  # 200 calls at once on a shared 2-core box: no spurious timeout


def test_a_grant_charges_debt_gives_back_and_keeps_a_floor(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        granted, _, left = await _grant(a, "g", 0.001, 5, 0.0, 3, 0)  # credit charged, nothing taken
        assert (granted, left) == (0, pytest.approx(2.0, abs=1e-3))
        granted, wait, left = await _grant(b, "g", 0.001, 5, 0.0, 0, 5)
        assert (granted, left) == (2, pytest.approx(0.0, abs=1e-3)) and wait == pytest.approx(1000, rel=1e-2)
        _, _, left = await _grant(a, "g", 0.001, 5, 0.0, 4, 0)  # credit charged whatever the bucket holds
        assert left == pytest.approx(-4.0, abs=1e-3)
        _, _, left = await _grant(a, "g", 0.001, 5, 0.0, -20, 0)  # given back: never above the burst
        assert left == pytest.approx(5.0)
        assert (await _grant(b, "g", 0.001, 5, 3.0, 0, 5))[0] == 2  # three stay behind for higher priorities

    _with(redis_server, body)


def test_replicas_count_each_other(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert a.replicas == 2
        await b.flush()
        assert b.replicas == 2

    _with(redis_server, body)


def test_two_replicas_share_one_bucket_through_their_leases(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        await b.flush()
        assert lease_size(0.01, 4, 2, 0.1) == 1
        for s in (a, b, a, b):  # burst 4: each replica's first take on credit, then a lease of 1; all charged
            assert await s.take("k", 0.01, 4) == (True, 0.0)
            await until(_settled(a, b))
        for s in (a, b):  # the shared bucket is empty: refused locally, with the bucket's wait
            taken, wait = await s.take("k", 0.01, 4)
            assert not taken and 90 < wait <= 100
        assert a.fallbacks == b.fallbacks == 0
        assert (await b.take("other", 0.01, 4))[0]  # another bucket: its own

    _with(redis_server, body)


def test_concurrent_takes_stay_within_the_bound_and_every_admission_is_charged(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        await b.flush()
        results = await asyncio.gather(*(s.take("x", 0.001, 50) for _ in range(100) for s in (a, b)))
        admitted = sum(taken for taken, _ in results)
        size = lease_size(0.001, 50, 2, 0.1)
        assert 50 - 2 * size <= admitted <= 50 + 2 * size  # the bound: lease size * replicas
        assert a.fallbacks == b.fallbacks == 0
        await until(_settled(a, b))
        for s in (a, b):
            await s.flush(release=True)  # held tokens back, credit paid
        raw = aioredis.from_url(redis_server.url)
        try:
            left = float(await raw.hget("t:bucket:x", "t"))  # type: ignore[misc]
        finally:
            await raw.aclose()
        assert left == pytest.approx(50 - admitted, abs=0.05)  # every admission taken from the shared bucket

    _with(redis_server, body, timeout_s=5.0)


def test_counters_add_locally_and_flush_across_replicas(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert await a.add("spend", 1.5, 0.5) == 1.5
        assert await b.add("spend", 2.25, 0.5) == 2.25  # b does not know a's pending add yet
        await a.flush()
        await b.flush()
        assert b.counters.total("spend") == 3.75  # the flush answered the shared total
        assert await a.get("spend") == 3.75
        assert await a.add("spend", 1, 0.5) == 4.75  # flushed total + pending
        assert await b.get("absent") == 0.0
        await a.flush()
        await asyncio.sleep(0.7)  # the TTL ran from the first add (EXPIRE NX): the later ones did not renew it
        assert await a.get("spend") == 0.0

    _with(redis_server, body)


def test_bindings_are_mirrored_and_written_in_the_background(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert await a.bind("session-1", "inst-a", 5) == "inst-a"
        await a.flush()  # set in Redis, published to b's mirror
        await until(lambda: b.bindings.get("session-1") == "inst-a")
        assert await b.bind("session-1", "inst-b", 5) == "inst-a"
        await b.rebind("session-1", "inst-b", 5)
        await b.flush()
        await until(lambda: a.bindings.get("session-1") == "inst-b")
        assert await a.bind("session-1", "inst-c", 5) == "inst-b"
        # both bind one new key before either flushes: Redis keeps the first, the other's mirror is corrected
        assert await a.bind("race", "x", 5) == "x" and await b.bind("race", "y", 5) == "y"
        await a.flush()
        await b.flush()
        assert await b.bind("race", "z", 5) == "x"  # by Redis's answer or a's message, whichever came first

    _with(redis_server, body)


def test_a_claim_is_taken_once_among_replicas_and_given_back(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert await a.claim("verdict:r1", 60) and not await b.claim("verdict:r1", 60)  # Redis answered b
        assert not await a.claim("verdict:r1", 60)  # a remembers its own
        got = await asyncio.gather(*(s.claim("verdict:r2", 60) for s in (a, b, a, b)))
        assert sorted(got) == [False, False, False, True]  # concurrent: exactly one
        await a.unclaim("verdict:r1")
        assert await b.claim("verdict:r1", 60) and not await a.claim("verdict:r1", 60)

    _with(redis_server, body)


def test_memory_claims_are_this_process_s_and_expire() -> None:
    now = [0.0]
    m = MemoryShared(lambda: now[0])

    async def body() -> None:
        assert await m.claim("k", 10) and not await m.claim("k", 10)
        now[0] = 11.0
        assert await m.claim("k", 10)  # expired
        await m.unclaim("k")
        assert await m.claim("k", 10)

    asyncio.run(body())


def test_a_replica_that_starts_reads_the_bindings_into_its_mirror(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        for i in range(3):
            await a.bind(f"old-{i}", f"inst-{i}", 60)
        await a.flush()
        c = RedisShared(redis_server.url, key_prefix="t:", replica_id="c", retry_s=0.05, flush_s=3600.0)
        await c.start()
        try:
            await until(lambda: c.bindings.get("old-2") == "inst-2")
            assert await c.bind("old-0", "inst-z", 60) == "inst-0"  # not placed anew: a's binding
        finally:
            await c.close()

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
        await until(lambda: bool(got_b))  # sent in the background at once, not at the next flush
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
        await a.flush()
        redis_server.stop()
        assert await a.add("n", 1, 60) == 2  # the last flushed total and the pending add
        await a.flush()  # fails: the add stays pending
        assert not a.healthy and a.problem and await a.get("n") == 2
        # the local rule: rate / replicas, burst / replicas (2 replicas known): 2 of a 4-token bucket
        assert [(await a.take("bucket", 0.001, 4))[0] for _ in range(3)] == [True, True, False]
        assert await a.bind("k", "v", 60) == "v"
        got_a: list[dict[str, Any]] = []
        a.subscribe("c", got_a.append)
        await a.publish("c", {"n": 1})
        assert got_a == [{"n": 1}]  # local handlers still run
        assert a.fallbacks >= 5
        await until(lambda: not b.healthy)  # b's listener saw the connection drop
        redis_server.start()  # empty: what the old one held is gone
        await until(lambda: a.healthy and b.healthy and a.problem is None)
        await until(lambda: b.store._pubsub is not None)
        await a.flush()  # what was added during the outage is written now, on the 1 known before (restored)
        assert await b.get("n") == 2 and await b.get("k") == 0.0
        await a.publish("c", {"n": 2})
        await until(lambda: {"n": 2} in got_b)
        assert (await a.take("after", 0.01, 4))[0] and a.leases.leases  # leased again

    with caplog.at_level(logging.WARNING, logger="router_core.shared.redis_shared"):
        _with(redis_server, body)
    assert any("unavailable" in r.message for r in caplog.records)
    assert any("reachable again" in r.message for r in caplog.records)


def test_unreachable_at_start_routes_locally_by_the_local_share_rule() -> None:
    now = [0.0]

    async def run() -> None:
        s = RedisShared(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.05, retry_s=0.05, clock=lambda: now[0])
        await s.start()
        try:
            assert not s.healthy and s.problem
            s.replicas = 4  # as last known: each replica takes a quarter of the rate and the burst
            assert [(await s.take("b", 8, 8))[0] for _ in range(2)] == [True, True]
            assert await s.take("b", 8, 8) == (False, pytest.approx(0.5))
            now[0] += 0.5
            assert (await s.take("b", 8, 8))[0]
            assert s.fallbacks == 4 and not s.leases.leases
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


def test_held_reads_the_mirror_and_queues_no_write(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert a.held("s") is None
        assert await a.bind("s", "inst-a", 5) == "inst-a" and a.held("s") == "inst-a"
        await a.flush()  # set in Redis, published to b's mirror
        await until(lambda: b.held("s") == "inst-a")  # another replica's binding, as b's bind would answer
        assert b.bindings.drain() == []  # the read owes Redis nothing (a bind would queue an nx write)

    _with(redis_server, body)
