"""A worker's ``/metrics`` answers for every worker: peers on their private loopback ports, one slow, one gone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.run.procs import free_ports
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.ops_routes import add_worker_metrics
from router_core.metrics.worker_merge import WORKER_UP
from schemas.config import RouteLensConfig
from tests.promtext import Samples, samples
from tests.router_core.gateway.test_forwarding import MemoryHooks

CONFIG = {"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]},
          "scrape": {"interval_s": 60}}
STORE = b"# HELP routelens_store_traces_pending Stored.\n# TYPE routelens_store_traces_pending gauge\n" \
        b"routelens_store_traces_pending 7.0\n"


async def store_series() -> bytes:  # what serve's store process republishes through every worker
    return STORE


@asynccontextmanager
async def worker(number: int, ports: list[int], served: int) -> AsyncIterator[TestClient[Any, Any]]:
    """Worker ``number`` of ``len(ports)``, its store series republished, ``served`` requests counted."""
    config = RouteLensConfig.model_validate(CONFIG)
    gw = Gateway(config, build_router(config), MemoryHooks())
    gw.metrics_sources.append(store_series)
    for _ in range(served):
        gw.metrics.record_request("m", "a", 200)
    app = gw.build_app()
    add_worker_metrics(gw, app, number, ports)
    async with TestClient(TestServer(app)) as client:
        yield client


async def scrape(client: TestClient[Any, Any]) -> tuple[Samples, float]:
    start = time.monotonic()
    resp = await client.get("/metrics")
    assert resp.status == 200
    return samples(await resp.text()), time.monotonic() - start


def served(m: Samples) -> dict[str, float]:
    return {dict(labels)["worker"]: v for (name, labels), v in m.items()
            if name == "routelens_gateway_requests_total"}


def test_every_worker_answers_for_all_and_the_store_once() -> None:
    async def scrapes() -> list[Samples]:
        ports = free_ports(3)
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(worker(i, ports, served=i + 2)) for i in range(3)]
            return [(await scrape(client))[0] for client in clients]

    for m in asyncio.run(scrapes()):  # whichever answers, the same series
        assert served(m) == {"0": 2, "1": 3, "2": 4}
        assert {w: m.value(WORKER_UP, worker=w) for w in "012"} == {"0": 1, "1": 1, "2": 1}
        assert m.value("routelens_store_traces_pending") == 7  # once, unlabelled (samples() refuses twice)


def test_a_worker_gone_or_slow_is_left_out_after_the_timeout_and_said() -> None:
    ports = free_ports(3)

    async def scrape_with_peers_down() -> tuple[Samples, float]:
        release = asyncio.Event()

        async def stalled(_: web.Request) -> web.Response:  # worker 1: it answers nothing until the test ends
            await release.wait()
            return web.Response(text="")

        slow = web.Application()
        slow.router.add_get("/metrics", stalled)
        runner = web.AppRunner(slow)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", ports[1]).start()
        try:
            async with worker(0, ports, served=2) as client:  # worker 2 never started: nothing on its port
                return await scrape(client)
        finally:
            release.set()
            await runner.cleanup()

    m, took = asyncio.run(scrape_with_peers_down())
    assert took < 3.0  # the 1 s timeout, not the stalled worker's 30 s
    assert served(m) == {"0": 2}
    assert {w: m.value(WORKER_UP, worker=w) for w in "012"} == {"0": 1, "1": 0, "2": 0}
    assert m.value("routelens_store_traces_pending") == 7


def test_one_worker_keeps_its_series_as_they_were() -> None:
    async def alone() -> Samples:
        config = RouteLensConfig.model_validate(CONFIG)
        gw = Gateway(config, build_router(config), MemoryHooks())
        gw.metrics.record_request("m", "a", 200)
        async with TestClient(TestServer(gw.build_app())) as client:
            return (await scrape(client))[0]

    m = asyncio.run(alone())
    assert m.value("routelens_gateway_requests_total", model="m", instance="a", code="200") == 1
    assert not [name for name, _ in m if name == WORKER_UP]
