"""A round worker 0 finishes late never takes a follower's state back in time.

Soak of ``serve --workers 2`` (bench.soak_workers): worker 0 stopped (SIGSTOP) in the middle of a
round, its scrapes done before the stop stamped then; worker 1 scraped for itself meanwhile (no
round for 2.5 intervals); once worker 0 ran again it finished that round and worker 1 took it
whole: its newer gauges replaced by older ones, ``scraped_at`` back in time, and a scrape that
timed out only because worker 0 was stopped marked an instance failing that worker 1 had just
scraped well.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import aiohttp

from router_core.state.parse import EngineGauges
from router_core.state.scrape_round import ScrapeResult
from router_core.state.scraper import MetricsScraper
from router_core.state.view import StateView
from tests.router_core.conftest import make_config

T0 = datetime(2026, 12, 7, 9, 0, 0, tzinfo=UTC)


def _gauges(queue: float) -> EngineGauges:
    return EngineGauges(engine="vllm", queue=queue, running=0.0, kv_cache_usage=0.5, warmup_progress=1.0,
                        e2e_buckets=((0.5, queue), (float("inf"), queue)))


def test_a_late_round_leaves_what_the_follower_scraped_since() -> None:
    specs = make_config(fleet={"instances": [{"id": i, "model": "m", "url": "http://127.0.0.1:9"}
                                             for i in ("a", "b", "c")]}).fleet.instances
    now = [T0 + timedelta(seconds=4)]  # the follower scraped for itself at 09:00:04
    cfg = make_config()
    view = StateView(specs, cfg.constraints, scrape=cfg.scrape, clock=lambda: 100.0, wall=lambda: now[0])
    view.update("a", _gauges(7.0))
    view.update("b", _gauges(2.0))

    async def run() -> MetricsScraper:
        async with aiohttp.ClientSession() as session:
            follower = MetricsScraper(specs, view, session, clock=lambda: 100.0)
            # worker 0's round scraped a and c at 09:00:01, then stopped; b timed out when it ran again
            follower.follow(9, 3.5, [ScrapeResult("a", _gauges(1.0), None, None, T0 + timedelta(seconds=1)),
                                     ScrapeResult("b", None, "timeout: no answer within 0.5s", "timeout", None),
                                     ScrapeResult("c", _gauges(3.0), None, None, T0 + timedelta(seconds=1))])
            return follower

    follower = asyncio.run(run())
    snap = view.snapshot()
    assert (snap["a"].queue, snap["a"].scraped_at) == (7.0, T0 + timedelta(seconds=4))  # its own, newer
    assert (snap["b"].queue, snap["b"].scrape_error) == (2.0, None) and "b" not in follower.failing()
    assert (snap["c"].queue, snap["c"].scraped_at) == (3.0, T0 + timedelta(seconds=1))  # news to it: taken
    # a round that is newer than what it holds is taken whole, failures included
    follower.follow(10, 0.5, [ScrapeResult("a", _gauges(5.0), None, None, T0 + timedelta(seconds=6)),
                              ScrapeResult("b", None, "timeout: no answer within 0.5s", "timeout",
                                           T0 + timedelta(seconds=4))])
    snap = view.snapshot()
    assert (snap["a"].queue, snap["a"].scraped_at) == (5.0, T0 + timedelta(seconds=6))
    assert snap["b"].scrape_error == "timeout: no answer within 0.5s" and follower.failing() == {"b": "timeout"}


def test_the_view_keeps_newer_gauges_than_a_scrape_stamped_earlier() -> None:
    specs = make_config(fleet={"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]}).fleet.instances
    cfg = make_config()
    view = StateView(specs, cfg.constraints, scrape=cfg.scrape, clock=lambda: 100.0, wall=lambda: T0)
    assert view.update("a", _gauges(4.0), at=T0 + timedelta(seconds=2))
    assert not view.update("a", _gauges(9.0), at=T0 + timedelta(seconds=1))
    assert view.snapshot()["a"].queue == 4.0 and view.scraped_at("a") == T0 + timedelta(seconds=2)
