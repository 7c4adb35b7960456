"""A replica that starts after a breaker opened elsewhere sees it open (the breakers kept as a state, not only sent)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis

from router_core.resilience.breaker import BreakerState
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.hub import BreakerHub
from router_core.shared.base import MemoryShared, SharedState
from router_core.shared.redis_shared import RedisShared
from schemas.config.resilience import BreakerSettings
from schemas.fleet import InstanceSpec
from tests.redis_server import RedisServer, redis_server

__all__ = ["redis_server"]  # the fixture, imported for pytest

SPECS = [InstanceSpec(id=f"i{n}", model="m", url=f"http://h{n}", zone="local") for n in range(2)]
_KW: dict[str, Any] = {"key_prefix": "t:", "timeout_s": 0.5, "retry_s": 0.05, "flush_s": 3600.0}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _hub(shared: SharedState, clock: Clock, gauges: dict[tuple[str, str], int] | None = None) -> BreakerHub:
    board = BreakerBoard(BreakerSettings.model_validate({"instance": {"open_s": 5}}), SPECS, clock=clock)
    sink = {} if gauges is None else gauges
    return BreakerHub(board, shared, set_gauge=lambda s, n, v: sink.__setitem__((s, n), v), emit_event=None,
                      wall=lambda: datetime(2026, 1, 1, tzinfo=UTC))


async def _open_i0(hub: BreakerHub) -> None:
    for _ in range(3):  # consecutive_failures: 3
        adm = hub.board.admit(SPECS[0])
        assert adm is not None
        hub.board.done(adm, "timeout")
    await hub.drain()
    assert hub.board.get("instance", "i0").state is BreakerState.OPEN  # type: ignore[union-attr]


def _state(hub: BreakerHub, name: str = "i0") -> BreakerState:
    b = hub.board.get("instance", name)
    assert b is not None
    return b.state


def test_a_replica_started_after_a_breaker_opened_sees_it_open(redis_server: RedisServer) -> None:
    async def run() -> None:
        clock = Clock()
        a = RedisShared(redis_server.url, replica_id="a", **_KW)
        hub_a = _hub(a, clock)
        await a.start()
        try:
            await _open_i0(hub_a)
            await a.flush()
            gauges: dict[tuple[str, str], int] = {}
            b = RedisShared(redis_server.url, replica_id="b", **_KW)
            hub_b = _hub(b, clock, gauges)  # subscribed before it starts, as the gateway does
            await b.start()
            try:
                assert _state(hub_b) is BreakerState.OPEN and _state(hub_b, "i1") is BreakerState.CLOSED
                assert gauges[("instance", "i0")] == int(BreakerState.OPEN)
                assert "from replica" in hub_b.board.views()[0]["reason"]
                client = aioredis.Redis.from_url(redis_server.url)
                try:  # kept for open_s (5 s) and a second more, not for good
                    assert 0 < await client.pttl("t:kept:breakers") <= 6000
                finally:
                    await client.aclose()
                assert await hub_a.close("instance", "i0", "test")
                await a.flush()
                await asyncio.sleep(0)
            finally:
                await b.close()
            c = RedisShared(redis_server.url, replica_id="c", **_KW)
            hub_c = _hub(c, clock)
            await c.start()
            await c.close()
            assert _state(hub_c) is BreakerState.CLOSED  # closed on a: no state kept any more
        finally:
            await a.close()

    asyncio.run(run())


def test_a_kept_breaker_stays_open_only_for_what_is_left_of_its_open_s() -> None:
    async def run() -> None:
        clock = Clock()
        shared = MemoryShared(clock)
        hub_a = _hub(shared, clock)
        await _open_i0(hub_a)
        clock.t += 3.0
        hub_b = _hub(shared, clock)  # a replica that comes later (a MemoryShared: a handler subscribed later)
        assert _state(hub_b) is BreakerState.OPEN
        assert hub_b.board.views()[0]["since_s"] == pytest.approx(3.0)  # opened 3 s ago, not now
        clock.t += 2.0
        hub_b.board.sweep()
        assert _state(hub_b) is BreakerState.HALF_OPEN  # after open_s from the opening, as on a

    asyncio.run(run())
