"""Counters' totals across a Redis restarted *empty* (real redis-server, no persistence): restored, counted once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from router_core.resilience.budgets import BudgetTracker
from router_core.shared.redis_shared import RedisShared
from tests.redis_server import RedisServer, redis_server
from tests.router_core.resilience.test_budget_outage import BUDGET, NOW, _settle
from tests.router_core.resilience.test_budget_outage import SPEND as BAND_SPEND
from tests.router_core.shared.redis_pair import QUIET, redis_command, run_pair, until

__all__ = ["redis_server"]  # the fixture, imported for pytest

_KW: dict[str, Any] = {**QUIET, "timeout_s": 0.5}
RESTART_S = 10.0  # the longest wait for the replicas to see Redis stop or answer again
SPEND = "budget:day:2024-05-01:spend"



async def _restart_empty(server: RedisServer, a: RedisShared, b: RedisShared) -> None:
    server.stop()  # SIGKILL, no persistence: the server that starts again holds nothing
    await until(lambda: not a.healthy and not b.healthy, RESTART_S)


def test_a_counter_is_its_total_before_an_empty_restart_plus_the_outage_adds(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        await a.add(SPEND, 2.0, 600)
        await b.add(SPEND, 1.0, 600)
        await a.flush()
        await b.flush()
        assert await a.get(SPEND) == await b.get(SPEND) == 3.0  # both know the total

        await _restart_empty(redis_server, a, b)
        assert await a.add(SPEND, 0.5, 600) == 3.5  # owed while Redis is down
        assert await b.add(SPEND, 0.25, 600) == 3.25
        redis_server.start()
        await until(lambda: a.healthy and b.healthy, RESTART_S)
        assert a.store.server_id == b.store.server_id  # both synced with the new server
        await a.flush()
        await b.flush()
        # 3 + 0.75: not the outage adds alone (0.75), and the 3 both knew restored once (not 6.75)
        assert float(await redis_command(redis_server.url, "GET", f"t:counter:{SPEND}")) == pytest.approx(3.75)
        assert await a.get(SPEND) == pytest.approx(3.75) and await b.get(SPEND) == pytest.approx(3.75)
        assert 0 < await redis_command(redis_server.url, "PTTL", f"t:counter:{SPEND}") <= 600_000  # TTL left
        assert a.totals_restored == b.totals_restored == 1

    run_pair(redis_server.url, body, **_KW)


def test_a_worker_knowing_the_later_total_restores_it_after_another_worker_added_its_owed_spend(
        redis_server: RedisServer) -> None:
    """Order does not matter: b (knows 3) restores after a (knows 2) restored and flushed its owed 0.5."""
    async def body(a: RedisShared, b: RedisShared) -> None:
        await a.add(SPEND, 2.0, 600)
        await a.flush()  # a knows 2
        await b.add(SPEND, 1.0, 600)
        await b.flush()  # b knows 3
        gate, synced = asyncio.Event(), b.store.on_sync
        assert synced is not None

        async def held_back(new_server: bool) -> None:
            await gate.wait()
            await synced(new_server)

        b.store.on_sync = held_back  # b reconnects only when the test lets it
        await _restart_empty(redis_server, a, b)
        await a.add(SPEND, 0.5, 600)
        await b.add(SPEND, 0.25, 600)
        redis_server.start()
        await until(lambda: a.healthy, RESTART_S)
        await a.flush()
        assert float(await redis_command(redis_server.url, "GET", f"t:counter:{SPEND}")) == pytest.approx(2.5)
        assert not b.healthy
        gate.set()
        await until(lambda: b.healthy, RESTART_S)
        await b.flush()
        # max(2, 3) + 0.5 + 0.25; a plain max of the counter and 3 would have lost a's 0.5 (3.25)
        assert float(await redis_command(redis_server.url, "GET", f"t:counter:{SPEND}")) == pytest.approx(3.75)
        await b.add(SPEND, 1.0, 600)
        await b.flush()
        assert await a.get(SPEND) == pytest.approx(4.75)

    run_pair(redis_server.url, body, **_KW)


def test_totals_are_restored_through_a_second_empty_restart_and_a_fresh_worker_adds_on_top(
        redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        await a.add(SPEND, 4.0, 600)
        await a.flush()
        await b.get(SPEND)
        for outage_add, want in ((1.0, 5.0), (2.0, 7.0)):
            await _restart_empty(redis_server, a, b)
            await a.add(SPEND, outage_add, 600)
            redis_server.start()
            await until(lambda: a.healthy and b.healthy, RESTART_S)
            await a.flush()
            await b.get(SPEND)
            assert await b.get(SPEND) == pytest.approx(want)
        c = RedisShared(redis_server.url, replica_id="c", **_KW)  # starts after: knows nothing, restores nothing
        await c.start()
        try:
            await c.add(SPEND, 1.0, 600)
            await c.flush()
            assert c.totals_restored == 0 and await c.get(SPEND) == pytest.approx(8.0)
        finally:
            await c.close()

    run_pair(redis_server.url, body, **_KW)


def test_an_expired_counter_is_not_restored(redis_server: RedisServer) -> None:
    now = [1000.0]

    async def body(a: RedisShared, b: RedisShared) -> None:
        await a.add("short", 1.0, 60)
        await a.add(SPEND, 1.0, 600)
        await a.flush()
        now[0] += 100  # on the replicas' clock "short"'s window has ended (Redis, asked, would say so too)
        await _restart_empty(redis_server, a, b)
        redis_server.start()
        await until(lambda: a.healthy and b.healthy, RESTART_S)
        assert await redis_command(redis_server.url, "EXISTS", "t:counter:short") == 0
        assert await a.get(SPEND) == 1.0 and a.totals_restored == 1
        assert 0 < await redis_command(redis_server.url, "PTTL", f"t:counter:{SPEND}") <= 500_000  # the 500 s left

    run_pair(redis_server.url, body, **_KW, clock=lambda: now[0])


def test_a_restoration_record_left_from_a_counters_earlier_life_is_dropped_by_the_first_add(
        redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        await redis_command(redis_server.url, "HSET", "t:restored:x", "base", "100", "added", "0")  # counter gone
        await a.add("x", 1.0, 600)
        await a.flush()
        assert await redis_command(redis_server.url, "EXISTS", "t:restored:x") == 0
        await _restart_empty(redis_server, a, b)
        redis_server.start()
        await until(lambda: a.healthy and b.healthy, RESTART_S)
        assert await a.get("x") == 1.0  # the 100 of the stale record is nowhere

    run_pair(redis_server.url, body, **_KW)


def test_a_budget_does_not_start_again_when_redis_restarts_empty(redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        wa, wb = BudgetTracker(BUDGET, a), BudgetTracker(BUDGET, b)
        wa.record("big", 4.0, NOW)
        wb.record("big", 2.0, NOW)
        await _settle()
        await a.flush()
        await b.flush()
        await _restart_empty(redis_server, a, b)
        wa.record("big", 1.0, NOW)  # owed
        await _settle()
        redis_server.start()
        await until(lambda: a.healthy and b.healthy, RESTART_S)
        await a.flush()
        for t in (wa, wb):
            await t.refresh(NOW)
            assert t.view(NOW).use == pytest.approx(0.7)  # 4 + 2 before, 1 during: not 0.1
            assert t.state(NOW)[0]["spend"] == pytest.approx(7.0) and not t.is_estimated
        assert float(await redis_command(redis_server.url, "GET", f"t:counter:{BAND_SPEND}")) == pytest.approx(7.0)

    run_pair(redis_server.url, body, beat_again=True, **_KW)
