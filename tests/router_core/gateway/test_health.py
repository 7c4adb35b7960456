"""``GET /health`` and ``GET /v1/router/state`` when scraping (or the hooks' storage) stalls."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from tests.router_core.gateway.gateway_kit import metrics_only_fleet
from tests.router_core.gateway.test_forwarding import MemoryHooks


class Clocks:
    def __init__(self) -> None:
        self.t = 1000.0
        self.wall0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)

    def perf(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return self.wall0 + timedelta(seconds=self.t - 1000.0)


class StalledStorageHooks(MemoryHooks):
    def __init__(self) -> None:
        super().__init__()
        self.reason: str | None = None

    def health(self) -> str | None:
        return self.reason


async def probe(hooks: MemoryHooks) -> list[tuple[int, Any]]:
    """Health and state: fresh, after 60 s with no round (the loop asleep), and with storage stalled."""
    seen: list[tuple[int, Any]] = []
    async with metrics_only_fleet({"interval_s": 10, "timeout_s": 0.5}) as cfg:
        clocks = Clocks()
        gateway = Gateway(cfg, build_router(cfg), hooks, perf=clocks.perf, wall=clocks.wall)
        async with TestClient(TestServer(gateway.build_app())) as client:
            async def get(path: str) -> None:
                resp = await client.get(path)
                seen.append((resp.status, orjson.loads(await resp.read())))

            await get("/health")
            await get("/v1/router/state")
            clocks.t += 60  # the loop's first sleep (10 s) is virtual time away: no round completes
            await get("/health")
            await get("/v1/router/state")
            if isinstance(hooks, StalledStorageHooks):
                hooks.reason = "trace spool stalled"
                await get("/health")
    return seen


def test_health_and_state_report_a_stalled_scrape_loop() -> None:
    h1, s1, h2, s2 = asyncio.run(probe(MemoryHooks()))
    assert h1 == (200, {"status": "ok"})
    assert s1[0] == 200 and s1[1]["scrape"] == {"last_round_age_s": 0.0, "last_round_s": 0.0, "interval_s": 10,
                                                "source": "own", "stalled": False, "failing": {}}
    assert not s1[1]["instances"][0]["stale"]
    assert h2 == (503, {"status": "degraded",
                        "reason": "scrape loop stalled: no round completed for 60.0s (bound 30.5s)"})
    assert s2[1]["scrape"]["stalled"] and s2[1]["instances"][0]["stale"] and s2[1]["instances"][0]["age_s"] == 60


def test_health_asks_the_hooks_when_they_can_tell() -> None:
    seen = asyncio.run(probe(StalledStorageHooks()))
    assert seen[-1] == (503, {"status": "degraded", "reason": "scrape loop stalled: no round completed for 60.0s "
                                                             "(bound 30.5s); trace spool stalled"})
