"""``engine: external``: a server without /metrics is never scraped and is judged by what the gateway sees.

Before, such an instance was "never scraped", hence saturated (KV 1.0, queue at the cap) and
rejected by the freshness filter: held out for good, reachable only by failing open.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from app.config import load_config
from router_core.decide.decision import DecisionContext
from router_core.decide.replay import redecide
from router_core.decide.verify import first_difference
from router_core.state.inflight import InflightCounter
from router_core.state.quality import QualityTable
from router_core.state.scrape_metrics import ScrapeMetrics
from router_core.state.scraper import MetricsScraper
from router_core.state.staleness import effective_state
from router_core.state.view import StateView
from schemas import RoutingMode
from schemas.config import ScrapeSettings
from schemas.errors import ConfigError
from schemas.fleet import InstanceSnapshot
from tests.router_core.conftest import FLEET, NOW, decide, features, healthy, make_config, snap
from tests.router_core.decide.test_exact_replay import live, stored
from tests.router_core.state.test_view import Clock

SCRAPE = ScrapeSettings()
# big-b is a hosted API: same model as big-a, no /metrics.
EXT_FLEET = [{**i, "engine": "external"} if i["id"] == "big-b" else i for i in FLEET]


def external(queue: float | None = 0.0, running: float | None = 0.0) -> InstanceSnapshot:
    return InstanceSnapshot(instance="big-b", model="big", engine="external", queue=queue, running=running)


def test_an_external_snapshot_never_ages_and_is_not_saturated() -> None:
    for later in (0, 5, 3600):
        eff = effective_state(external(queue=3, running=1), NOW + timedelta(seconds=later), SCRAPE, 10.0)
        assert (eff.age_s, eff.suspect, eff.kv_cache_usage, eff.queue, eff.running) == (None, False, 0.0, 3.0, 1.0)
    none = effective_state(external(queue=None, running=None), NOW, SCRAPE, 10.0)
    assert (none.queue, none.running) == (0.0, 0.0)  # nothing counted: nothing in flight
    stored_bad = InstanceSnapshot.model_construct(instance="big-b", model="big", engine="external", queue=-2.0,
                                                  running=0.0, scraped_at=None)
    assert effective_state(stored_bad, NOW, SCRAPE, 10.0).queue == 10.0  # a nonsense count is saturated, never idle
    never = effective_state(InstanceSnapshot(instance="big-a", model="big", engine="vllm"), NOW, SCRAPE, 10.0)
    assert (never.suspect, never.kv_cache_usage, never.queue) == (True, 1.0, 10.0)  # a scraped engine: unchanged


def test_the_view_starts_an_external_instance_idle_and_never_marks_it_stale() -> None:
    config = make_config(fleet={"instances": EXT_FLEET})
    clock = Clock()
    view = StateView(config.fleet.instances, config.constraints, scrape=config.scrape, clock=clock.mono,
                     wall=clock.wall)
    first = view.snapshot()["big-b"]
    assert (first.engine, first.queue, first.running, first.kv_cache_usage) == ("external", 0.0, 0.0, None)
    assert (first.warmup_progress, first.warmup_source, first.scraped_at) == (1.0, "assumed", None)
    for _ in range(30):  # half a minute of rounds with no scrape of it ever
        view.tick()
        clock.t += 1.0
    got = view.snapshot()["big-b"]
    assert got.scraped_at is None and got.age_s is None and not got.stale
    assert got.latches and not any(latch.out for latch in got.latches)  # the default constraints keep it in
    assert view.snapshot()["big-a"].stale  # a vLLM instance that was never scraped still is
    view.observe("big-b", 120.0, ok=True)
    view.observe("big-b", 80.0, ok=False)
    view.tick()
    seen = view.snapshot()["big-b"]  # its own latency and errors come from the window, as for any instance
    assert (seen.window_requests, seen.error_rate, seen.p95_latency_ms is not None) == (2, 0.5, True)
    shown = next(i for i in view.views()["instances"] if i["instance"] == "big-b")
    assert shown["age_s"] is None and shown["stale"] is False
    assert view.views()["models"]["big"]["in_feasible_set"] == 1  # big-b in, big-a (never scraped) out


def test_the_scraper_never_asks_an_external_instance_for_metrics() -> None:
    hits = {"v": 0, "x": 0}

    async def run() -> tuple[MetricsScraper, CollectorRegistry, StateView]:
        servers = {}
        for iid in hits:
            async def handler(_: web.Request, iid: str = iid) -> web.Response:
                hits[iid] += 1
                return web.Response(text='vllm:num_requests_waiting{model_name="m"} 1\nvllm:kv_cache_usage_perc 0.2\n')

            app = web.Application()
            app.router.add_get("/metrics", handler)
            servers[iid] = TestServer(app)
            await servers[iid].start_server()
        url = {iid: str(s.make_url("")).rstrip("/") for iid, s in servers.items()}
        config = make_config(fleet={"instances": [
            {"id": "v", "model": "m", "url": url["v"]},
            {"id": "x", "model": "m", "url": url["x"], "engine": "external"}]})
        view = StateView(config.fleet.instances, config.constraints, scrape=config.scrape, clock=time.monotonic)
        registry = CollectorRegistry()
        try:
            async with aiohttp.ClientSession() as session:
                scraper = MetricsScraper(config.fleet.instances, view, session, timeout_s=2,
                                         metrics=ScrapeMetrics(registry))
                for _ in range(3):
                    await scraper.scrape_once()
        finally:
            for s in servers.values():
                await s.close()
        return scraper, registry, view

    scraper, registry, view = asyncio.run(run())
    assert hits == {"v": 3, "x": 0}  # the vLLM one every round, the external one never
    assert scraper.failing() == {} and view.snapshot()["v"].queue == 1.0
    x = view.snapshot()["x"]
    assert (x.scraped_at, x.scrape_error, x.queue) == (None, None, 0.0)
    assert registry.get_sample_value("routelens_scrape_failures_total", {"instance": "x", "reason": "connect"}) \
        is None


def test_the_gateway_in_flight_count_is_its_queue_and_balances() -> None:
    counter = InflightCounter()
    start = external()
    tickets = [counter.begin("big-b") for _ in range(3)]
    assert counter.adjust({"big-b": start})["big-b"].queue == 3.0
    counter.remote = {"big-b": 2}  # another worker's open requests to it
    assert counter.adjust({"big-b": start})["big-b"].queue == 5.0
    for t in tickets:
        counter.end(t)
    counter.remote = {}
    assert counter.adjust({"big-b": start})["big-b"] is start  # all ended: back to idle, the very snapshot
    later = start.model_copy(update={"error_rate": 0.0})  # a tick rebuilds it; scraped_at stays None
    t = counter.begin("big-b")
    assert counter.adjust({"big-b": later})["big-b"].queue == 1.0  # not reset: no scrape landed
    counter.end(t)
    assert counter.count("big-b") == 0


def test_the_queue_constraint_judges_an_external_instance_by_the_gateway_open_attempts() -> None:
    # Before, its latch read the snapshot's queue, 0 for good: 40 open requests to it never held it out,
    # and /v1/router/state showed it idle.
    config = make_config(fleet={"instances": EXT_FLEET})
    clock, counter = Clock(), InflightCounter()
    view = StateView(config.fleet.instances, config.constraints, scrape=config.scrape, clock=clock.mono,
                     wall=clock.wall, open_attempts=counter.open)

    def queue_latch() -> tuple[bool, float | None]:
        latch = next(la for la in view.snapshot()["big-b"].latches if la.constraint == "queue")
        return latch.out, latch.value

    def rounds(n: int) -> None:
        for _ in range(n):
            view.tick()
            clock.t += 1.0

    tickets = [counter.begin("big-b") for _ in range(8)]
    counter.begin("big-a")  # a scraped instance's open attempt: the decision adds it, not its latch
    counter.remote = {"big-b": 4}  # another worker's: 12 open in all, over the default 10
    rounds(4)  # broken for longer than exit_for (2 s)
    assert queue_latch() == (True, 12.0)
    shown = next(i for i in view.views()["instances"] if i["instance"] == "big-b")
    assert shown["queue"] == 12.0 and view.views()["models"]["big"]["in_feasible_set"] == 0
    assert view.snapshot()["big-b"].queue == 0.0  # the snapshot keeps no count: the decision adds its own
    for t in tickets:
        counter.end(t)
    counter.remote = {}
    rounds(7)  # good for longer than enter_for (5 s)
    assert queue_latch() == (False, 0.0)
    scraped = next(la for la in view.snapshot()["big-a"].latches if la.constraint == "queue")
    assert scraped.value == 10.0  # never scraped: saturated (the cap), its open attempt not added


def test_an_external_instance_is_feasible_and_a_decision_on_it_replays_exactly() -> None:
    config = make_config(fleet={"instances": EXT_FLEET})
    state = healthy() | {"big-b": external(queue=1.0)}
    ranked, trace = decide(state, config, feats=features(model="big"))
    cand = next(c for c in trace.candidates if c.instance == "big-b")
    assert cand.feasible and cand.violations == [] and trace.mode is RoutingMode.NORMAL
    assert cand.state is not None and cand.state.engine == "external" and cand.state.age_s is None
    assert "big-b" in ranked
    # the only feasible instance of its model (big-a never scraped): picked without failing open
    only, alone = decide(healthy() | {"big-a": snap("big-a", age=None), "big-b": external()}, config,
                         feats=features(model="big"))
    assert only == ["big-b"] and alone.mode is RoutingMode.NORMAL and not alone.fallback_triggered
    # decided live, stored as JSON, re-decided under the stored policy: the same decision
    ctx = DecisionContext(request_id="r-ext", features=features(model="big"), intent="chat", now=NOW,
                          quality=QualityTable(config.models).snapshot())
    again_state: dict[str, Any] = {"big-a": snap("big-a", kv=0.6), "big-b": external(queue=2.0),
                                   "small-a": snap("small-a")}
    trace = live(config, again_state, ctx)
    policy, rules = stored(config, None)
    assert first_difference(trace, redecide(trace, policy, rules)) is None
    assert next(c for c in trace.candidates if c.instance == "big-b").feasible


def test_engine_names_are_checked_and_the_loader_names_file_line_and_field(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="'tgi', 'llamacpp' or 'external'"):
        make_config(fleet={"instances": [{**FLEET[0], "engine": "openai"}]})
    for engine in ("vllm", "sglang", "tgi", "llamacpp", "external"):
        assert make_config(fleet={"instances": [{**FLEET[0], "engine": engine}]}).fleet.instances[0].engine == engine
    path = tmp_path / "c.yaml"
    path.write_text("fleet:\n  instances:\n    - id: a\n      model: m\n      url: http://127.0.0.1:1\n"
                    "      engine: vLLM\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert f"{path}:6: fleet.instances[0].engine: Input should be 'vllm', 'sglang'" in str(caught.value)
