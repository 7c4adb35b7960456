"""The scraper against a real loopback server serving good, hostile and broken /metrics."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from router_core.state.scrape_metrics import ScrapeMetrics
from router_core.state.scraper import MetricsScraper
from router_core.state.view import StateView
from schemas.fleet import InstanceSnapshot
from tests.router_core.conftest import make_config

GOOD = 'vllm:num_requests_waiting{model_name="m"} 2\nvllm:kv_cache_usage_perc{model_name="m"} 0.5\n'
BODIES: dict[str, tuple[int, str | bytes]] = {
    "big-a": (200, GOOD),
    "big-b": (200, 'vllm:e2e_request_latency_seconds_bucket{le="0.5"} 3\n'  # truncated histogram, then junk
                   "vllm:num_requests_waiting{model_name=\"m\" 1\n"),
    "small-a": (500, "boom"),
}


class Rig:
    """Loopback servers whose /metrics answers ``bodies[iid]`` (changeable between rounds)."""

    def __init__(self, bodies: dict[str, tuple[int, str | bytes]]) -> None:
        self.bodies = dict(bodies)
        self.servers: dict[str, TestServer] = {}
        self.registry = CollectorRegistry()

    async def start(self) -> None:
        for iid in self.bodies:
            async def handler(_: web.Request, iid: str = iid) -> web.StreamResponse:
                status, body = self.bodies[iid]
                if status == 0:  # drop the connection without an answer
                    assert _.transport is not None
                    _.transport.abort()
                return web.Response(status=status, body=body.encode() if isinstance(body, str) else body)

            app = web.Application()
            app.router.add_get("/metrics", handler)
            self.servers[iid] = TestServer(app)
            await self.servers[iid].start_server()
        cfg = make_config(fleet={"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/")}
                                               for iid, s in self.servers.items()]})
        self.view = StateView(cfg.fleet.instances, cfg.constraints, scrape=cfg.scrape, clock=time.monotonic)
        self.specs = cfg.fleet.instances

    def scraper(self, session: aiohttp.ClientSession, **kw: Any) -> MetricsScraper:
        return MetricsScraper(self.specs, self.view, session, timeout_s=2,
                              metrics=ScrapeMetrics(self.registry), **kw)

    def failures(self, instance: str, reason: str) -> float:
        value = self.registry.get_sample_value("routelens_scrape_failures_total",
                                               {"instance": instance, "reason": reason})
        return value or 0.0

    async def close(self) -> None:
        for s in self.servers.values():
            await s.close()


async def scrape(bodies: dict[str, tuple[int, str | bytes]]) -> dict[str, InstanceSnapshot]:
    rig = Rig(bodies)
    await rig.start()
    async with aiohttp.ClientSession() as session:
        await rig.scraper(session).scrape_once()
    await rig.close()
    return rig.view.snapshot()


def test_good_bad_and_failing_scrapes_each_get_a_state_and_a_reason() -> None:
    snaps = asyncio.run(scrape(BODIES))
    good = snaps["big-a"]
    assert (good.queue, good.kv_cache_usage, good.scrape_error) == (2.0, 0.5, None) and good.scraped_at
    assert snaps["big-b"].scraped_at is None and (snaps["big-b"].scrape_error or "").startswith("parse: unparseable")
    assert snaps["small-a"].scrape_error == "http_status: HTTP 500" and snaps["small-a"].scraped_at is None
    assert all(s.stale for iid, s in snaps.items() if iid != "big-a")  # no data: saturated, not healthy


def test_nan_and_huge_values_are_refused_and_the_snapshot_says_so() -> None:
    snaps = asyncio.run(scrape({"big-a": (200, "vllm:kv_cache_usage_perc NaN\nvllm:num_requests_waiting 1e300\n"),
                                "big-b": (200, "vllm:num_requests_waiting -5\nvllm:kv_cache_usage_perc 0.2\n")}))
    assert snaps["big-a"].scraped_at is None and (snaps["big-a"].scrape_error or "").startswith("out_of_range:")
    b = snaps["big-b"]
    assert (b.queue, b.kv_cache_usage) == (None, 0.2) and b.scraped_at is not None
    assert b.scrape_error == "out_of_range: queue=-5 refused (negative)"
    InstanceSnapshot.model_validate(b.model_dump(mode="json"))  # a stored copy reads back


def test_one_hostile_instance_is_contained_counted_and_logged_once_per_change(
        caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> tuple[Rig, list[dict[str, InstanceSnapshot]]]:
        rig = Rig({"big-a": (200, GOOD), "big-b": (200, b'vllm:num_requests_waiting{model_name="\xff"} 1\n'),
                   "small-a": (0, "")})
        await rig.start()
        rounds = []
        async with aiohttp.ClientSession() as session:
            scraper = rig.scraper(session)
            for body in (None, None, b"vllm:num_requests_waiting -5\n", GOOD):
                if body is not None:
                    rig.bodies["big-b"] = (200, body)
                await scraper.scrape_once()
                rounds.append(rig.view.snapshot())
        await rig.close()
        return rig, rounds

    with caplog.at_level(logging.WARNING, logger="router_core.state.scraper"):
        rig, rounds = asyncio.run(run())
    assert [r["big-a"].scrape_error for r in rounds] == [None] * 4 and all(r["big-a"].queue == 2 for r in rounds)
    assert [(r["big-b"].scrape_error or "").split(":")[0] for r in rounds] == ["decode", "decode", "out_of_range", ""]
    assert rounds[-1]["big-b"].queue == 2.0
    assert (rounds[0]["small-a"].scrape_error or "").startswith("connect: ")
    assert (rig.failures("big-b", "decode"), rig.failures("big-b", "out_of_range")) == (2, 1)
    assert rig.failures("small-a", "connect") == 4 and rig.failures("big-a", "decode") == 0
    assert rig.registry.get_sample_value("routelens_scrape_rounds_total") == 4
    lines = [r.getMessage() for r in caplog.records]
    assert [m.split(":")[0] for m in lines if "big-b" in m] == [
        "scrape of big-b failing (decode)", "scrape of big-b failing (out_of_range)",
        "scrape of big-b recovered (was failing"]
    assert len([m for m in lines if "small-a" in m]) == 1


def test_a_timeout_is_its_own_reason() -> None:
    async def run() -> tuple[Rig, InstanceSnapshot]:
        rig = Rig({"big-a": (200, GOOD)})
        await rig.start()

        async def slow(_: web.Request) -> web.Response:
            await asyncio.sleep(5)
            return web.Response(text=GOOD)

        app = web.Application()
        app.router.add_get("/metrics", slow)
        server = TestServer(app)
        await server.start_server()
        cfg = make_config(fleet={"instances": [{"id": "big-a", "model": "m",
                                                "url": str(server.make_url("")).rstrip("/")}]})
        rig.view = StateView(cfg.fleet.instances, scrape=cfg.scrape, clock=time.monotonic)
        async with aiohttp.ClientSession() as session:
            await MetricsScraper(cfg.fleet.instances, rig.view, session, timeout_s=0.05,
                                 metrics=ScrapeMetrics(rig.registry)).scrape_once()
        await server.close()
        await rig.close()
        return rig, rig.view.snapshot()["big-a"]

    rig, snap = asyncio.run(run())
    assert snap.scrape_error == "timeout: no answer within 0.05s" and rig.failures("big-a", "timeout") == 1


class FlakyView(StateView):
    """A view whose ``tick`` raises on the rounds listed (a bug somewhere downstream of the scrape)."""

    def __init__(self, *args: Any, bad_rounds: set[int], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.calls, self.bad_rounds = 0, bad_rounds

    def tick(self) -> None:
        self.calls += 1
        if self.calls in self.bad_rounds:
            raise ZeroDivisionError("a bug")
        super().tick()


def test_the_loop_survives_rounds_that_raise_and_a_callback_that_raises(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> tuple[FlakyView, int]:
        rig = Rig({"big-a": (200, GOOD)})
        await rig.start()
        view = FlakyView(rig.specs, scrape=make_config().scrape, clock=time.monotonic, bad_rounds={1, 2})
        rig.view = view
        stored = []

        def on_round() -> None:
            stored.append(1)
            if len(stored) <= 2:
                raise OSError("disk full")  # twice in a row: logged once

        async with aiohttp.ClientSession() as session:
            task = asyncio.create_task(rig.scraper(session, interval_s=0.01, on_round=on_round).run())
            while view.calls < 5 and not task.done():
                await asyncio.sleep(0.01)
            alive = not task.done()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await rig.close()
        return view, len(stored) if alive else -1

    with caplog.at_level(logging.ERROR, logger="router_core.state.scraper"):
        view, stored = asyncio.run(run())
    assert stored >= 3 and view.snapshot()["big-a"].queue == 2.0
    errors = [r.getMessage() for r in caplog.records]
    assert errors == ["scrape round failed; scraping goes on: a bug",
                      "after-round callback failed; scraping goes on: disk full"]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_stall_is_reported_after_three_intervals_and_a_timeout() -> None:
    async def run() -> None:
        rig = Rig({"big-a": (200, GOOD)})
        await rig.start()
        clock = Clock()
        async with aiohttp.ClientSession() as session:
            scraper = MetricsScraper(rig.specs, rig.view, session, interval_s=1.0, timeout_s=0.5, clock=clock)
            assert scraper.stall_after_s == 3.5 and scraper.stall_reason() is None
            clock.t += 3.5
            assert scraper.stall_reason() is None
            clock.t += 0.1
            assert scraper.stall_reason() == "scrape loop stalled: no round completed for 3.6s (bound 3.5s)"
            await scraper.scrape_once()
            assert scraper.stall_reason() is None and scraper.last_round_age_s() == 0
        await rig.close()

    asyncio.run(run())
