"""The scraper against a real loopback server serving good, hostile and broken /metrics."""

from __future__ import annotations

import asyncio
import time

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from router_core.scraper import MetricsScraper
from router_core.state import StateView
from schemas.fleet import InstanceSnapshot
from tests.router_core.conftest import make_config

GOOD = 'vllm:num_requests_waiting{model_name="m"} 2\nvllm:kv_cache_usage_perc{model_name="m"} 0.5\n'
BODIES = {
    "big-a": (200, GOOD),
    "big-b": (200, 'vllm:e2e_request_latency_seconds_bucket{le="0.5"} 3\n'  # truncated histogram, then junk
                   "vllm:num_requests_waiting{model_name=\"m\" 1\n"),
    "small-a": (500, "boom"),
}


async def scrape(bodies: dict[str, tuple[int, str]]) -> dict[str, InstanceSnapshot]:
    servers = {}
    for iid, (status, body) in bodies.items():
        async def handler(_: web.Request, status: int = status, body: str = body) -> web.Response:
            return web.Response(status=status, text=body)

        app = web.Application()
        app.router.add_get("/metrics", handler)
        servers[iid] = TestServer(app)
        await servers[iid].start_server()
    cfg = make_config(fleet={"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/")}
                                           for iid, s in servers.items()]})
    view = StateView(cfg.fleet.instances, cfg.constraints, scrape=cfg.scrape, clock=time.monotonic)
    async with aiohttp.ClientSession() as session:
        await MetricsScraper(cfg.fleet.instances, view, session, timeout_s=2).scrape_once()
    for s in servers.values():
        await s.close()
    return view.snapshot()


def test_good_bad_and_failing_scrapes_each_get_a_state_and_a_reason() -> None:
    snaps = asyncio.run(scrape(BODIES))
    good = snaps["big-a"]
    assert (good.queue, good.kv_cache_usage, good.scrape_error) == (2.0, 0.5, None) and good.scraped_at
    assert snaps["big-b"].scraped_at is None and "unparseable" in (snaps["big-b"].scrape_error or "")
    assert snaps["small-a"].scrape_error == "HTTP 500" and snaps["small-a"].scraped_at is None
    assert all(s.stale for iid, s in snaps.items() if iid != "big-a")  # no data: saturated, not healthy


def test_nan_and_huge_values_do_not_crash_the_view() -> None:
    snaps = asyncio.run(scrape({"big-a": (200, "vllm:kv_cache_usage_perc NaN\nvllm:num_requests_waiting 1e300\n")}))
    assert snaps["big-a"].kv_cache_usage is None and snaps["big-a"].queue == 1e300
