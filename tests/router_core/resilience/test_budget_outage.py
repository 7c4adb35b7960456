"""Budgets across workers while the shared state is down: each counts its own spend for every replica."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from router_core.resilience.budgets import BudgetTracker, budget_violation
from router_core.shared.base import MemoryShared
from schemas.config.economics import BudgetSettings

NOW = datetime(2026, 6, 3, 15, 0, tzinfo=UTC)
BUDGET = BudgetSettings(bands=[{"name": "all", "hours": [[0, 24]], "models": ["big"], "max_spend": 10.0}])
SPEND = "budget:all:2026-06-03/15:spend"  # the hourly window of 15:00


class Redis:
    """The store both workers reach while ``up`` (a :class:`MemoryShared` on an injected clock stands for it)."""

    def __init__(self, clock: list[float]) -> None:
        self.store = MemoryShared(clock=lambda: clock[0])
        self.up = True


class Worker(MemoryShared):
    """One worker's shared state on ``redis``, as :class:`RedisShared` behaves for counters.

    While Redis is down an add is owed and a total is the last known one plus what is owed; the owed
    adds are written once, at :meth:`reconnected` or the first call after Redis is back.
    """

    backend = "test"

    def __init__(self, redis: Redis, replicas: int, clock: list[float]) -> None:
        super().__init__(clock=lambda: clock[0])
        self.redis, self.replicas = redis, replicas
        self.known: dict[str, float] = {}
        self.owed: dict[str, tuple[float, float]] = {}  # counter -> (amount, ttl)

    @property
    def healthy(self) -> bool:
        return self.redis.up

    @property
    def problem(self) -> str | None:
        return None if self.redis.up else "test: Redis stopped"

    async def reconnected(self) -> None:
        """Write what is owed (RedisShared's first flush after Redis is back, within 50 ms)."""
        owed, self.owed = self.owed, {}
        for counter, (amount, ttl) in owed.items():
            self.known[counter] = await self.redis.store.add(counter, amount, ttl)

    async def add(self, counter: str, amount: float, ttl_s: float) -> float:
        if not self.redis.up:
            held = self.owed.get(counter, (0.0, ttl_s))[0] + amount
            self.owed[counter] = (held, ttl_s)
            return self.known.get(counter, 0.0) + held
        await self.reconnected()
        self.known[counter] = total = await self.redis.store.add(counter, amount, ttl_s)
        return total

    async def get(self, counter: str) -> float:
        if self.redis.up:
            await self.reconnected()
            self.known[counter] = await self.redis.store.get(counter)
        return self.known.get(counter, 0.0) + self.owed.get(counter, (0.0, 0.0))[0]


async def _settle() -> None:
    for _ in range(3):  # the background adds
        await asyncio.sleep(0)


async def _spend_until_stopped(trackers: list[BudgetTracker], amount: float) -> list[float]:
    """Each worker in turn serves calls to ``big`` at ``amount`` while its view lets it; what each spent."""
    spent = [0.0] * len(trackers)
    for _ in range(100):
        moved = False
        for i, t in enumerate(trackers):
            if not t.view(NOW).is_stopped("big"):
                t.record("big", amount, NOW)
                spent[i] += amount
                moved = True
        await _settle()
        if not moved:
            break
    return spent


def test_two_workers_with_redis_down_stop_at_the_budget_together_and_the_totals_come_back() -> None:
    async def run() -> None:
        clock = [0.0]
        redis = Redis(clock)
        a, b = Worker(redis, 2, clock), Worker(redis, 2, clock)
        wa, wb = BudgetTracker(BUDGET, a), BudgetTracker(BUDGET, b)
        wa.record("big", 2.0, NOW)
        wb.record("big", 1.0, NOW)
        await _settle()
        for t in (wa, wb):
            await t.refresh(NOW)
            assert t.view(NOW).use == pytest.approx(0.3) and "estimated" not in t.view(NOW).reason

        redis.up = False  # 7 left: each worker sees 3 + its own spend, and counts it twice
        clock[0] += 0.5
        spent = await _spend_until_stopped([wa, wb], 0.5)
        assert spent == [3.5, 3.5]  # 10 in all, not 3 + 2 * 7 = 17
        assert wa.is_estimated and wb.state(NOW)[0]["estimated"] is True
        await wa.refresh(NOW)  # a refresh while down keeps the estimate (its own spend since the last good read)
        for t in (wa, wb):
            v = t.view(NOW)
            assert v.is_stopped("big") and v.use == pytest.approx(1.0) and "estimated" in v.reason
            assert "estimated" in budget_violation(v).reason
            (row,) = t.state(NOW)
            assert row["estimated"] is True and row["stopped"] and row["spend"] == pytest.approx(10.0)

        redis.up = True  # the estimate stands until the next refresh, which reads the shared totals
        assert wa.is_estimated and wa.view(NOW).use == pytest.approx(1.0)
        await a.reconnected()
        await b.reconnected()
        for t in (wa, wb):
            await t.refresh(NOW)
            assert not t.is_estimated and t.view(NOW).use == pytest.approx(1.0)
            assert "estimated" not in t.view(NOW).reason
        assert await redis.store.get(SPEND) == pytest.approx(10.0)  # each owed add written once

    asyncio.run(run())


def test_the_estimate_ends_at_a_good_refresh_and_reads_only_what_was_spent() -> None:
    async def run() -> None:
        clock = [0.0]
        redis = Redis(clock)
        a, b = Worker(redis, 3, clock), Worker(redis, 3, clock)
        wa, wb = BudgetTracker(BUDGET, a), BudgetTracker(BUDGET, b)
        redis.up = False
        wa.record("big", 1.0, NOW)  # b spends nothing; a cannot know it
        await _settle()
        assert wa.view(NOW).use == pytest.approx(0.3)  # 1 counted for each of 3 replicas
        assert wb.view(NOW).use == 0.0 and wb.state(NOW)[0]["estimated"] is True
        redis.up = True
        await wa.refresh(NOW)
        await wb.refresh(NOW)
        assert wa.view(NOW).use == wb.view(NOW).use == pytest.approx(0.1)
        wa.record("big", 1.0, NOW)  # healthy: counted once
        await _settle()
        assert wa.view(NOW).use == pytest.approx(0.2)

    asyncio.run(run())


def test_one_process_on_the_memory_backend_is_unchanged() -> None:
    async def run() -> None:
        t = BudgetTracker(BUDGET, MemoryShared(clock=lambda: 0.0))
        for _ in range(9):
            t.record("big", 1.0, NOW)
        await _settle()
        v = t.view(NOW)
        assert v.use == pytest.approx(0.9) and not v.is_stopped("big") and not t.is_estimated
        assert t.state(NOW)[0]["estimated"] is False

    asyncio.run(run())


def test_a_lone_worker_with_redis_down_counts_its_spend_once_but_says_it_is_an_estimate() -> None:
    async def run() -> None:
        clock = [0.0]
        redis = Redis(clock)
        t = BudgetTracker(BUDGET, Worker(redis, 1, clock))
        redis.up = False
        t.record("big", 4.0, NOW)
        await _settle()
        assert t.view(NOW).use == pytest.approx(0.4) and "estimated" in t.view(NOW).reason

    asyncio.run(run())
