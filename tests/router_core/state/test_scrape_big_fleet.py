"""A big fleet's scrape loop: 150-300 instances on one gateway event loop (the audit of a platform team's fleet).

Every scrape costs the event loop CPU (reading and parsing the answer: 1-2 ms with a real vLLM
body). With every instance scraped at once, the last answers waited behind the others' parsing and
ran out of their timeout without their instance being slow: 49 of 200 instances timed out every
round against real vLLM bodies, went stale, and were routed around as saturated.
"""

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

import router_core.state.parse as parse_module
import router_core.state.scraper as scraper_module
from router_core.state.parse import EngineGauges, MetricsParseError, parse_engine_metrics
from router_core.state.scrape_metrics import ScrapeMetrics
from router_core.state.scraper import MetricsScraper
from router_core.state.view import StateView
from tests.contracts import contract
from tests.router_core.conftest import make_config

VLLM = (contract("prometheus") / "datadog_vllm_v0_opt125m_metrics.txt").read_text()
GOOD = 'vllm:num_requests_waiting{model_name="m"} 2\nvllm:kv_cache_usage_perc{model_name="m"} 0.5\n'
# What a real vLLM exports beside the gauges routing reads: histograms nobody here reads.
OTHER_HISTOGRAMS = "".join(
    f"# HELP vllm:request_{name}_seconds Unused here.\n# TYPE vllm:request_{name}_seconds histogram\n"
    + "".join(f'vllm:request_{name}_seconds_bucket{{le="{le}",model_name="m"}} {i}.0\n' for i, le in
              enumerate(("0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "+Inf")))
    + f'vllm:request_{name}_seconds_count{{model_name="m"}} 9.0\n'
    + f'vllm:request_{name}_seconds_sum{{model_name="m"}} 4.0\n'
    for name in ("queue", "inference", "prefill", "decode", "time_per_output_token", "prompt_tokens"))


def busy(seconds: float) -> None:
    """Hold the CPU (and so the event loop) for ``seconds``, as parsing a large body does."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def serve(body: str) -> TestServer:
    """One loopback server answering ``body`` on ``/<anything>/metrics`` (many instances, one port)."""
    async def handler(_: web.Request) -> web.Response:
        return web.Response(text=body)

    app = web.Application()
    app.router.add_get("/{instance}/metrics", handler)
    server = TestServer(app)
    await server.start_server()
    return server


def fleet(server: TestServer, n: int) -> tuple[Any, StateView]:
    base = str(server.make_url("")).rstrip("/")
    cfg = make_config(fleet={"instances": [{"id": f"i{k:03d}", "model": "m", "url": f"{base}/i{k:03d}"}
                                           for k in range(n)]})
    return cfg.fleet.instances, StateView(cfg.fleet.instances, cfg.constraints, scrape=cfg.scrape,
                                          clock=time.monotonic)


def test_a_round_of_150_instances_whose_parsing_costs_cpu_times_none_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # 4 ms of CPU per scrape on the loop (a ~30 kB vLLM body before routing_lines): 0.6 s a round,
    # twice the timeout. Only the scrapes in flight may wait for each other's CPU.
    def costly(body: str | bytes) -> EngineGauges:
        busy(0.004)
        return parse_engine_metrics(body)

    monkeypatch.setattr(scraper_module, "parse_engine_metrics", costly)

    async def run() -> tuple[dict[str, str], int]:
        server = await serve(GOOD)
        specs, view = fleet(server, 150)
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=512)) as session:
                scraper = MetricsScraper(specs, view, session, interval_s=1.0, timeout_s=0.3)
                await scraper.scrape_once()
                fresh = sum(1 for s in view.snapshot().values() if s.queue == 2.0)
                return scraper.failing(), fresh
        finally:
            await server.close()

    failing, fresh = asyncio.run(run())
    assert failing == {} and fresh == 150


def test_scrapes_in_flight_are_bounded() -> None:
    in_flight, peak = 0, 0

    async def run() -> None:
        async def handler(_: web.Request) -> web.Response:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return web.Response(text=GOOD)

        app = web.Application()
        app.router.add_get("/{instance}/metrics", handler)
        server = TestServer(app)
        await server.start_server()
        specs, view = fleet(server, 100)
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=512)) as session:
                await MetricsScraper(specs, view, session, timeout_s=2, max_in_flight=10).scrape_once()
        finally:
            await server.close()

    asyncio.run(run())
    assert 1 < peak <= 10


def test_rounds_start_every_interval_from_start_to_start_and_an_overrun_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    took = iter([0.3, 1.5, 2.0, 0.2])  # how long each round takes (on the injected clock)
    delays: list[float] = []
    registry = CollectorRegistry()

    async def sleep(seconds: float) -> None:
        delays.append(round(seconds, 6))
        now[0] += seconds
        if len(delays) == 5:
            raise asyncio.CancelledError

    def round_takes() -> None:
        now[0] += next(took)

    async def run() -> MetricsScraper:
        cfg = make_config()
        view = StateView(cfg.fleet.instances, cfg.constraints, scrape=cfg.scrape, clock=time.monotonic)
        async with aiohttp.ClientSession() as session:
            scraper = MetricsScraper([], view, session, interval_s=1.0, on_round=round_takes, clock=lambda: now[0],
                                     sleep=sleep, metrics=ScrapeMetrics(registry))
            with pytest.raises(asyncio.CancelledError):
                await scraper.run()
        return scraper

    with caplog.at_level(logging.WARNING, logger="router_core.state.scraper"):
        scraper = asyncio.run(run())
    # The first round one interval after start; then 1 s from each round's start: 0.7 s after a
    # round of 0.3 s, none after rounds of 1.5 and 2 s, 0.8 s after one of 0.2 s.
    assert delays == [1.0, 0.7, 0.0, 0.0, 0.8]
    assert scraper.last_round_s() == pytest.approx(0.2)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith("scrape rounds overrun: a round of 0 instances took 1.50s")
    assert said[1].startswith("scrape rounds back within scrape.interval_s (1s)")
    assert registry.get_sample_value("routelens_scrape_round_duration_seconds_count") == 4
    assert registry.get_sample_value("routelens_scrape_round_duration_seconds_sum") == pytest.approx(4.0)


def test_the_stall_bound_allows_for_every_instance_hanging_a_wave_at_a_time() -> None:
    async def run() -> float:
        server = await serve(GOOD)
        specs, view = fleet(server, 300)
        try:
            async with aiohttp.ClientSession() as session:
                return MetricsScraper(specs, view, session, interval_s=1.0, timeout_s=0.5).stall_after_s
        finally:
            await server.close()

    assert asyncio.run(run()) == 3.0 + 10 * 0.5  # 300 instances, 32 at a time: 10 waves of timeouts


def test_only_the_routing_families_reach_the_prometheus_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real = parse_module.text_string_to_metric_families

    def spy(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(parse_module, "text_string_to_metric_families", spy)
    body = VLLM + OTHER_HISTOGRAMS
    g = parse_engine_metrics(body)
    assert (g.engine, g.queue, g.running, g.kv_cache_usage, g.num_gpu_blocks, g.block_size) == (
        "vllm", 0.0, 0.0, 0.0, 7281, 16)
    assert g.process_start_s == pytest.approx(1.7181405583e9) and g.ttft_buckets is not None
    assert len(parsed) == 1
    assert "python_gc" not in parsed[0] and "vllm:request_queue_seconds" not in parsed[0]
    assert "vllm:time_per_output_token_seconds" not in parsed[0] and len(parsed[0]) < len(body) / 3


def test_a_malformed_line_of_a_family_not_read_no_longer_loses_the_scrape() -> None:
    g = parse_engine_metrics(GOOD + "some_other_metric{broken 1\n")
    assert (g.queue, g.kv_cache_usage) == (2.0, 0.5)


@pytest.mark.parametrize(("body", "reason"), [
    ("garbage {{{ not metrics", "parse"),
    ("# TYPE x gauge\nx 1\n", "no_gauges"),
    ('vllm:num_requests_waiting{model_name="m" 1\n' + VLLM, "parse"),
    ("vllm:num_requests_waiting -1\n" + OTHER_HISTOGRAMS, "out_of_range"),
], ids=["garbage", "other-metrics", "broken-routing-line", "out-of-range"])
def test_a_body_without_usable_routing_lines_fails_for_the_reason_the_whole_body_earns(body: str, reason: str) -> None:
    with pytest.raises(MetricsParseError) as caught:
        parse_engine_metrics(body)
    assert caught.value.reason == reason
