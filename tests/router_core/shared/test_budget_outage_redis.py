"""Two workers' budget across a Redis outage (real redis-server, stopped and started again with its data)."""

from __future__ import annotations

import pytest

from router_core.resilience.budgets import BudgetTracker
from router_core.shared.redis_shared import RedisShared
from tests.redis_server import RedisServer, redis_server
from tests.router_core.resilience.test_budget_outage import BUDGET, NOW, SPEND, _settle, _spend_until_stopped
from tests.router_core.shared.redis_pair import QUIET, redis_command, run_pair, until

__all__ = ["redis_server"]  # the fixture, imported for pytest

RESTART_S = 10.0  # the longest wait for the replicas to see Redis stop or answer again



def test_workers_stop_at_the_budget_while_redis_is_down_and_read_the_right_totals_after(
        redis_server: RedisServer) -> None:
    async def body(a: RedisShared, b: RedisShared) -> None:
        assert a.replicas == b.replicas == 2
        wa, wb = BudgetTracker(BUDGET, a), BudgetTracker(BUDGET, b)
        wa.record("big", 2.0, NOW)
        wb.record("big", 1.0, NOW)
        await _settle()
        await a.flush()
        await b.flush()
        for t in (wa, wb):
            await t.refresh(NOW)
            assert t.view(NOW).use == pytest.approx(0.3) and "estimated" not in t.view(NOW).reason

        await redis_command(redis_server.url, "SAVE")  # it comes back with its data (a Redis that persists)
        redis_server.stop()
        await until(lambda: not a.healthy and not b.healthy, RESTART_S)
        spent = await _spend_until_stopped([wa, wb], 0.5)
        assert spent == [3.5, 3.5]  # 3 + 7 = the budget of 10, not 3 + 2 * 7
        await a.flush()  # fails: a's adds stay owed
        await wa.refresh(NOW)  # reads nothing: the estimate stands
        for t in (wa, wb):
            v, (row,) = t.view(NOW), t.state(NOW)
            assert v.is_stopped("big") and "estimated" in v.reason and row["estimated"] is True

        redis_server.start()
        await until(lambda: a.healthy and b.healthy, RESTART_S)
        await wa.refresh(NOW)  # before a's flush: Redis's 3 plus a's 3.5 owed (b's not written yet)
        assert wa.view(NOW).use == pytest.approx(0.65) and not wa.is_estimated
        await a.flush()
        await wa.refresh(NOW)
        assert wa.view(NOW).use == pytest.approx(0.65)  # the owed adds now in Redis, counted once
        await b.flush()
        for t in (wa, wb):
            await t.refresh(NOW)
            v, (row,) = t.view(NOW), t.state(NOW)
            assert v.use == pytest.approx(1.0) and v.is_stopped("big")
            assert row["estimated"] is False and row["spend"] == 10.0
        assert float(await redis_command(redis_server.url, "GET", f"t:counter:{SPEND}")) == 10.0  # each owed add once

    run_pair(redis_server.url, body, beat_again=True, **{**QUIET, "timeout_s": 0.5})
