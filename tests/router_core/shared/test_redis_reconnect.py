"""RedisShared across Redis's absence and restarts: the replica count expected, claims written again, kept messages."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from app.run.procs import free_port
from router_core.shared.base import MemoryShared
from router_core.shared.redis_shared import RedisShared
from router_core.shared.wiring import build_shared
from schemas.config.shared import SharedSettings
from tests.redis_server import RedisServer, redis_server
from tests.router_core.shared.redis_pair import QUIET, run_pair, until

__all__ = ["redis_server"]  # the fixture, imported for pytest

_KW: dict[str, Any] = {**QUIET, "timeout_s": 0.5}
RESTART_S = 10.0  # the longest wait for replicas to see Redis stop or answer again


def test_redis_unreachable_from_the_start_splits_a_bucket_among_the_workers_expected() -> None:
    """serve --workers 2 with Redis down from the start: a 20/s rule admits about 10/s per worker, 20/s in all."""
    now = [0.0]
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there

    async def body(a: RedisShared, b: RedisShared) -> None:
        assert not a.healthy and not b.healthy and a.replicas == b.replicas == 2
        admitted = []
        for _ in range(2):  # the burst, then one second's refill
            admitted.append([sum([(await s.take("rule:rps20", 20, 20))[0] for _ in range(40)]) for s in (a, b)])
            now[0] += 1.0
        assert admitted == [[10, 10], [10, 10]]

    run_pair(url, body, **_KW, clock=lambda: now[0], replicas=2)


def test_the_workers_serve_names_reach_the_redis_state_and_a_heartbeat_then_counts() -> None:
    settings = SharedSettings(backend="redis", url=f"redis://127.0.0.1:{free_port()}/0")
    shared = build_shared(settings, replicas=3)
    assert isinstance(shared, RedisShared) and shared.replicas == 3
    assert isinstance(build_shared(SharedSettings(), replicas=3), MemoryShared)


def test_a_heartbeat_answered_replaces_the_count_expected(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        await a.flush()
        assert a.replicas == 2  # as Redis counts them, not the 5 expected

    run_pair(redis_server.url, body, **_KW, replicas=5)


def test_a_claim_made_before_redis_restarts_is_refused_through_another_replica_after(
        redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert await a.claim("verdict:r1", 600)
        redis_server.stop()
        await until(lambda: not a.healthy and not b.healthy, RESTART_S)  # each saw its subscription drop
        assert await a.claim("verdict:r2", 600)  # while down: a's own, owed
        redis_server.start()  # on the same port, empty
        await until(lambda: a.healthy and b.healthy, RESTART_S)
        assert not await b.claim("verdict:r1", 600)  # a wrote its claim again before using Redis
        assert not await b.claim("verdict:r2", 600)  # and the one it took while Redis was down
        assert await b.claim("verdict:r3", 600) and not await a.claim("verdict:r3", 600)
        assert a.reclaims.written == 2 and a.reclaims.conflicts == 0 and not a.reclaims.owed

    run_pair(redis_server.url, body, **_KW)


def test_claims_taken_during_an_outage_are_written_when_the_same_redis_answers_again(
        redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert await a.claim("verdict:old", 600)
        a.store._down("test: a alone loses Redis")  # the server stays up, with a's earlier claim
        assert await a.claim("verdict:new", 600) and a.reclaims.owed == {"verdict:new"}
        await until(lambda: a.healthy, RESTART_S)
        assert a.store.server_id is not None and not await b.claim("verdict:new", 600)
        assert a.reclaims.written == 1  # only the owed one: the server is the same
        client = aioredis.Redis.from_url(redis_server.url)
        try:
            assert 0 < await client.pttl("t:claim:verdict:new") <= 600_000
        finally:
            await client.aclose()

    run_pair(redis_server.url, body, **_KW)


def test_a_kept_message_reaches_a_replica_that_starts_later_until_dropped(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        await a.publish("state", {"x": 1}, keep="k1", keep_s=60)
        await a.publish("state", {"x": 2}, keep="k2", keep_s=60)
        await a.publish("state", {"x": 3}, keep="k2", keep_s=0)  # k2 has no state any more
        await a.publish("state", {"x": 4})  # not kept
        await a.flush()
        got: list[dict[str, Any]] = []
        c = RedisShared(redis_server.url, replica_id="c", **_KW)
        c.subscribe("state", got.append)
        await c.start()
        try:
            assert [{k: v for k, v in m.items() if k != "age_s"} for m in got] == [{"x": 1}]
            assert 0.0 <= got[0]["age_s"] < 60
        finally:
            await c.close()

    run_pair(redis_server.url, body, **_KW)


def test_kept_messages_are_written_again_into_a_restarted_redis(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        await a.publish("state", {"x": 1}, keep="k1", keep_s=600)
        await a.publish("state", {"x": 0}, keep="k0", keep_s=600)
        await a.flush()
        redis_server.stop()
        await until(lambda: not a.healthy, RESTART_S)
        await a.publish("state", {"x": 2}, keep="k2", keep_s=600)  # not sent: owed
        await a.publish("state", {"x": 0}, keep="k0", keep_s=0)  # closed meanwhile: owed too
        redis_server.start()  # empty
        await until(lambda: a.healthy, RESTART_S)
        got: list[dict[str, Any]] = []
        c = RedisShared(redis_server.url, replica_id="c", **_KW)
        c.subscribe("state", got.append)
        await c.start()
        await c.close()
        assert sorted(m["x"] for m in got) == [1, 2]  # k1 again (a new server), k2 owed, k0 ended

    run_pair(redis_server.url, body, **_KW)
