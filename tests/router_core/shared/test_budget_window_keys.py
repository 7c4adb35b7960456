"""Two gateway workers count a local-day budget into one Redis key, across 00:00 UTC (real redis-server)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
import redis.asyncio as aioredis

from router_core.resilience.budgets import BudgetTracker
from router_core.shared.redis_shared import RedisShared
from schemas.config.economics import BudgetSettings
from tests.redis_server import RedisServer, redis_server
from tests.router_core.shared.redis_pair import QUIET, run_pair

__all__ = ["redis_server"]  # the fixture, imported for pytest

SHANGHAI = ZoneInfo("Asia/Shanghai")
DAY = BudgetSettings(timezone="Asia/Shanghai",
                     bands=[{"name": "day", "hours": [[0, 24]], "max_spend": 10.0, "window_s": 86_400}])


def test_workers_share_the_local_days_window_in_redis(redis_server: RedisServer) -> None:
    before, after = datetime(2026, 6, 3, 7, 50, tzinfo=SHANGHAI), datetime(2026, 6, 3, 8, 10, tzinfo=SHANGHAI)

    async def body(a: RedisShared, b: RedisShared) -> None:
        wa, wb = BudgetTracker(DAY, a), BudgetTracker(DAY, b)
        wa.record("m", 3.0, before)  # 23:50 UTC on 2 June
        wb.record("m", 4.0, after)  # 00:10 UTC on 3 June: the same local day
        for _ in range(3):
            await asyncio.sleep(0)
        await a.flush()
        await b.flush()
        await wa.refresh(after)
        await wb.refresh(after)
        assert wa.view(after).use == wb.view(after).use == pytest.approx(0.7)
        raw = aioredis.from_url(redis_server.url)
        try:
            keys = sorted(k.decode() for k in await raw.keys("*budget:*"))
        finally:
            await raw.aclose()
        assert keys and all(":budget:day:2026-06-03:" in k for k in keys), keys

    run_pair(redis_server.url, body, beat_again=True, **QUIET, timeout_s=5.0)
