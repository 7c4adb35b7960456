"""In-flight counts across workers, over a real redis-server: one worker's open requests reach the other's picker."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from router_core.shared.base import MemoryShared
from router_core.shared.redis_shared import RedisShared
from router_core.state.inflight import InflightCounter
from router_core.state.inflight_share import InflightShare
from schemas.fleet import InstanceSnapshot
from tests.redis_server import RedisServer, redis_server
from tests.router_core.shared.redis_pair import run_pair, until

__all__ = ["redis_server"]  # the fixture, imported for pytest

SCRAPED = datetime(2026, 12, 1, tzinfo=UTC)
STATE = {"x": InstanceSnapshot(instance="x", model="m", queue=2, scraped_at=SCRAPED),
         "y": InstanceSnapshot(instance="y", model="m", queue=0, scraped_at=SCRAPED)}


def _queues(counter: InflightCounter) -> dict[str, float | None]:
    return {iid: s.queue for iid, s in counter.adjust(STATE).items()}


def test_one_worker_s_open_requests_are_in_the_other_s_state(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        ca, cb = InflightCounter(), InflightCounter()
        sa, sb = InflightShare(ca, a, "a"), InflightShare(cb, b, "b")
        for c in (ca, cb):
            c.adjust(STATE)  # each has seen the scrape
        tickets = [ca.begin("x") for _ in range(3)]
        cb.begin("y")
        await sa.tick()
        await sb.tick()
        await until(lambda: _queues(cb) == {"x": 5, "y": 1} and _queues(ca) == {"x": 5, "y": 1})
        for t in tickets:
            ca.end(t)
        await sa.tick()
        await until(lambda: _queues(cb) == {"x": 2, "y": 1})
        assert _queues(ca) == {"x": 2, "y": 1}

    # 2 s a call: a loaded machine stalls past 0.5 s now and then, and a timed-out publish is dropped
    run_pair(redis_server.url, body, key_prefix="t:", timeout_s=2.0, presence_s=0.0)


def test_a_silent_worker_counts_for_nothing_after_expiry() -> None:
    now = [0.0]
    shared = MemoryShared()
    mine, other = InflightCounter(), InflightCounter()
    share = InflightShare(mine, shared, "mine", clock=lambda: now[0], expire_s=1.0)
    loud = InflightShare(other, shared, "other", clock=lambda: now[0])
    other.adjust(STATE)
    other.begin("x")

    async def run() -> None:
        await loud.tick()
        assert mine.remote == {"x": 1} and other.remote == {}  # its own message is not counted twice
        now[0] = 1.5
        await share.tick()
        assert mine.remote == {}

    asyncio.run(run())


def test_bad_messages_are_ignored() -> None:
    shared = MemoryShared()
    counter = InflightCounter()
    InflightShare(counter, shared, "me")

    async def run() -> None:
        for msg in ({"replica": 3, "counts": {"x": 1}}, {"replica": "z", "counts": ["x"]},
                    {"replica": "z", "counts": {"x": "many", "y": -2, "w": 2}}):
            await shared.publish("inflight", msg)
        assert counter.remote == {"w": 2}

    asyncio.run(run())
