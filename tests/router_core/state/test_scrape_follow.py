"""One worker scrapes, the others follow its rounds: the same state, no scrape of their own while rounds come.

With ``serve --workers N`` each worker scraped every instance: N scrapes a second per instance and N
times the parsing CPU. Worker 0's rounds now reach the others (app.run.scrape_share carries the bytes).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from datetime import UTC, datetime

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from router_core.state.parse import EngineGauges
from router_core.state.scrape_round import ScrapeResult, decode_round, encode_round
from router_core.state.scraper import FOLLOW_FOR, MetricsScraper
from router_core.state.view import StateView
from tests.router_core.conftest import make_config

BODY = ('vllm:num_requests_waiting{model_name="m"} 3\nvllm:num_requests_running{model_name="m"} 1\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 0.25\n'
        'vllm:e2e_request_latency_seconds_bucket{le="0.5",model_name="m"} 1\n'
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 4\n')


def test_a_round_reads_back_equal_infinite_bounds_refusals_and_failures_included() -> None:
    at = datetime(2026, 12, 7, 9, 30, 1, 250000, tzinfo=UTC)
    gauges = EngineGauges(engine="vllm", queue=3.0, running=None, kv_cache_usage=1.0, warmup_progress=None,
                          e2e_buckets=((0.5, 1.0), (math.inf, 4.0)), num_gpu_blocks=100, block_size=16,
                          adjustments=("kv_cache_usage=1.004 clamped to 1", "running=-1 refused (negative)"),
                          process_start_s=1.7e9)
    results = [ScrapeResult("a", gauges, None, "out_of_range", at),
               ScrapeResult("b", None, "timeout: no answer within 0.5s", "timeout", None)]
    seq, took, back = decode_round(encode_round(7, 0.031, results))
    assert (seq, took, back) == (7, 0.031, results)


@pytest.mark.parametrize("line", [b"", b"{}", b'{"seq": 1, "results": [["a"]]}', b"[1]",
                                  b'{"seq": 1, "results": [["a", {"nope": 1}, null, null, null]]}'])
def test_a_line_that_is_not_a_round_is_a_value_error(line: bytes) -> None:
    with pytest.raises(ValueError, match="not a scrape round"):
        decode_round(line)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _view(specs: list, clock: Clock, wall: datetime) -> StateView:  # type: ignore[type-arg]
    cfg = make_config()
    return StateView(specs, cfg.constraints, scrape=cfg.scrape, clock=clock, wall=lambda: wall)


def test_a_follower_holds_the_leaders_state_and_scrapes_nothing_while_rounds_arrive() -> None:
    hits: Counter[str] = Counter()

    async def run() -> None:
        async def handler(request: web.Request) -> web.Response:
            hits[request.match_info["iid"]] += 1
            return web.Response(text=BODY if request.match_info["iid"] != "dead" else "boom",
                                status=200 if request.match_info["iid"] != "dead" else 500)

        app = web.Application()
        app.router.add_get("/{iid}/metrics", handler)
        server = TestServer(app)
        await server.start_server()
        base = str(server.make_url("")).rstrip("/")
        specs = make_config(fleet={"instances": [{"id": i, "model": "m", "url": f"{base}/{i}"}
                                                 for i in ("a", "dead")]}).fleet.instances
        clock = Clock()
        leader_view = _view(specs, clock, datetime(2026, 12, 7, 9, 0, 0, tzinfo=UTC))
        follower_view = _view(specs, clock, datetime(2026, 12, 7, 9, 0, 5, tzinfo=UTC))  # its own clock is later
        slept: list[float] = []

        async def sleep(s: float) -> None:
            slept.append(s)
            clock.now += s
            await asyncio.sleep(0)

        async with aiohttp.ClientSession() as session:
            leader = MetricsScraper(specs, leader_view, session, interval_s=1.0, clock=clock)
            follower = MetricsScraper(specs, follower_view, session, interval_s=1.0, clock=clock, sleep=sleep)
            rounds: list[tuple[int, float | None, list[ScrapeResult]]] = []
            leader.add_tap(lambda seq, took, results: rounds.append((seq, took, results)))
            leader.add_tap(lambda seq, took, results: follower.follow(*decode_round(encode_round(seq, took,
                                                                                                   results))))
            await leader.scrape_once()
            assert [r[0] for r in rounds] == [1] and {r.instance for r in rounds[0][2]} == {"a", "dead"}
            a, fa = leader_view.snapshot()["a"], follower_view.snapshot()["a"]
            assert (fa.queue, fa.running, fa.kv_cache_usage, fa.scraped_at) == (3.0, 1.0, 0.25, a.scraped_at)
            assert follower_view.snapshot()["dead"].scrape_error == leader_view.snapshot()["dead"].scrape_error
            assert follower_view.snapshot()["dead"].scrape_error.startswith("http_status")
            assert follower.failing() == {"dead": "http_status"} == leader.failing()
            assert follower.following and follower.last_round_age_s() == 0.0
            before = sum(hits.values())
            task = asyncio.create_task(follower.run())
            for _ in range(20):  # its loop runs while the leader's last round stands for its own
                await asyncio.sleep(0)
                if clock.now >= 100.0 + FOLLOW_FOR - 1.0:
                    break
            assert sum(hits.values()) == before  # it scraped nothing itself
            for _ in range(500):  # rounds stop coming: it scrapes for itself
                if sum(hits.values()) > before:
                    break
                await asyncio.sleep(0.01)
            assert hits["a"] > 1 and hits["dead"] > 1  # rounds of its own (the sleeps here take no time)
            assert not follower.following
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await server.close()

    asyncio.run(run())


def test_a_round_naming_instances_the_follower_does_not_have_takes_the_rest() -> None:
    specs = make_config(fleet={"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]}).fleet.instances
    clock = Clock()
    view = _view(specs, clock, datetime(2026, 12, 7, 9, 0, 0, tzinfo=UTC))
    at = datetime(2026, 12, 7, 8, 59, 59, tzinfo=UTC)
    g = EngineGauges(engine="vllm", queue=5.0, running=0.0, kv_cache_usage=0.5, warmup_progress=1.0)

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            MetricsScraper(specs, view, session, clock=clock).follow(
                3, 0.01, [ScrapeResult("gone", g, None, None, at), ScrapeResult("a", g, None, None, at)])

    asyncio.run(run())
    assert view.snapshot()["a"].queue == 5.0 and view.snapshot()["a"].scraped_at == at
