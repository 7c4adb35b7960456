"""Warm-up of real engines, which export no warm-up gauge: process uptime over ``scrape.warmup_s``.

Seed 000, problem 2: instances were marked ready while still cold (about 90 s to warm). Only the
simulator exports a warm-up gauge; a vLLM instance counted as fully warm the moment it answered.
Now its ``process_start_time_seconds`` gives the ramp, and where neither is known the snapshot
says the 1.0 is assumed.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from router_core.state.parse import MetricsParseError, parse_engine_metrics
from router_core.state.scraper import MetricsScraper
from router_core.state.view import StateView
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.yamlconf import parse_yaml_model
from tests.contracts import contract
from tests.router_core.conftest import decide, make_config
from tests.router_core.plugin_kit import build, candidate, context

ROOT = Path(__file__).resolve().parents[3]
CONTRACTS = contract("prometheus")
VLLM_FIXTURE = (CONTRACTS / "datadog_vllm_v0_opt125m_metrics.txt").read_text()
VLLM_FIXTURE_START = 1.7181405583e09  # its process_start_time_seconds
NOW = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)


class Wall:
    """The injected wall clock: a fixed time that tests move by hand."""

    def __init__(self, at: datetime = NOW) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def vllm(started_ago_s: float | None, *, sim_warmup: float | None = None, now: datetime = NOW) -> str:
    text = 'vllm:num_requests_waiting{model_name="m"} 0\nvllm:kv_cache_usage_perc{model_name="m"} 0.1\n'
    if started_ago_s is not None:
        text += ("# TYPE process_start_time_seconds gauge\n"
                 f"process_start_time_seconds {now.timestamp() - started_ago_s}\n")
    if sim_warmup is not None:
        text += f"routelens_sim_warmup_progress {sim_warmup}\n"
    return text


def view_of(config: RouteLensConfig | None = None, wall: Wall | None = None) -> tuple[StateView, Wall]:
    cfg = config or make_config()
    clock = wall or Wall()
    return StateView(cfg.fleet.instances, cfg.constraints, scrape=cfg.scrape, clock=lambda: 0.0, wall=clock), clock


def scraped(text: str, config: RouteLensConfig | None = None, wall: Wall | None = None) -> InstanceSnapshot:
    view, _ = view_of(config, wall)
    view.update("big-a", parse_engine_metrics(text))
    view.tick()
    return view.snapshot()["big-a"]


def test_vllm_started_45_s_ago_is_half_warm() -> None:
    snap = scraped(vllm(45))
    assert (snap.warmup_progress, snap.warmup_source) == (pytest.approx(0.5), "uptime")


def test_vllm_up_200_s_is_warm() -> None:
    snap = scraped(vllm(200))
    assert (snap.warmup_progress, snap.warmup_source) == (1.0, "uptime")


def test_the_real_vllm_scrape_carries_its_start_time_and_ramps_from_it() -> None:
    assert parse_engine_metrics(VLLM_FIXTURE).process_start_s == VLLM_FIXTURE_START
    at = datetime.fromtimestamp(VLLM_FIXTURE_START + 45, tz=UTC)
    snap = scraped(VLLM_FIXTURE, wall=Wall(at))
    assert (snap.warmup_progress, snap.warmup_source) == (pytest.approx(0.5), "uptime")


def test_a_restart_starts_the_warm_up_again_and_it_ramps_on_with_the_clock() -> None:
    view, wall = view_of()
    view.update("big-a", parse_engine_metrics(vllm(3600)))
    assert view.snapshot()["big-a"].warmup_progress == 1.0
    wall.at += timedelta(seconds=1)
    view.update("big-a", parse_engine_metrics(vllm(9, now=wall.at)))  # restarted 9 s ago: newer start time
    assert view.snapshot()["big-a"].warmup_progress == pytest.approx(0.1)
    wall.at += timedelta(seconds=36)
    view.update("big-a", parse_engine_metrics(vllm(45, now=wall.at)))  # same start time, 36 s later
    assert view.snapshot()["big-a"].warmup_progress == pytest.approx(0.5)


def test_the_simulator_gauge_wins_over_the_start_time() -> None:
    snap = scraped(vllm(200, sim_warmup=0.2))
    assert (snap.warmup_progress, snap.warmup_source) == (0.2, "gauge")
    cold = scraped(vllm(200, sim_warmup=0.0))  # a gauge at 0 is a value, not a missing one
    assert (cold.warmup_progress, cold.warmup_source) == (0.0, "gauge")


@pytest.mark.parametrize("text", [
    vllm(None),
    "tgi_queue_size 0\ntgi_batch_current_size 1\n",
    (CONTRACTS / "datadog_sglang_opt125m_metrics.txt").read_text(),
], ids=["vllm-without-start-time", "tgi", "sglang"])
def test_no_gauge_and_no_start_time_is_warm_and_says_it_is_assumed(text: str) -> None:
    snap = scraped(text)
    assert (snap.warmup_progress, snap.warmup_source) == (1.0, "assumed")


def test_warmup_s_0_turns_the_uptime_ramp_off() -> None:
    snap = scraped(vllm(5), config=make_config(scrape={"warmup_s": 0}))
    assert (snap.warmup_progress, snap.warmup_source) == (1.0, "assumed")


def test_warmup_s_is_a_setting() -> None:
    snap = scraped(vllm(45), config=make_config(scrape={"warmup_s": 180}))
    assert snap.warmup_progress == pytest.approx(0.25)
    assert RouteLensConfig.model_validate({"fleet": make_config().fleet.model_dump()}).scrape.warmup_s == 90.0


def test_a_start_time_ahead_of_the_gateway_clock_counts_as_just_started() -> None:
    snap = scraped(vllm(-30))
    assert (snap.warmup_progress, snap.warmup_source) == (0.0, "uptime")


def test_a_gateway_starting_next_to_instances_up_for_hours_sees_them_warm_at_once() -> None:
    view, _ = view_of()  # a fresh view: the gateway has just started
    for iid in ("big-a", "big-b", "small-a"):
        view.update(iid, parse_engine_metrics(vllm(6 * 3600)))
    view.tick()
    assert {s.warmup_progress for s in view.snapshot().values()} == {1.0}


def test_start_time_parsing_is_guarded() -> None:
    newest = parse_engine_metrics('vllm:num_requests_waiting 0\nprocess_start_time_seconds{pid="1"} 1000\n'
                                  'process_start_time_seconds{pid="2"} 2000\n')
    assert newest.process_start_s == 2000 and newest.adjustments == ()
    for bad, note in (("NaN", "process_start_time=nan refused (not finite)"),
                      ("-1", "process_start_time=-1 refused (not positive)")):
        g = parse_engine_metrics(f"vllm:num_requests_waiting 0\nprocess_start_time_seconds {bad}\n")
        assert g.process_start_s is None and g.adjustments == (note,) and g.queue == 0
    with pytest.raises(MetricsParseError) as caught:  # any Python app's /metrics is not an engine's
        parse_engine_metrics("process_start_time_seconds 1.7e9\n")
    assert caught.value.reason == "no_gauges"


def shipped_config() -> RouteLensConfig:
    return parse_yaml_model(RouteLensConfig, (ROOT / "routelens.yaml").read_text(), "routelens.yaml")


def test_a_restarted_instance_scores_lower_but_the_shipped_constraints_keep_it_in() -> None:
    cfg = shipped_config()
    assert "warmup_progress" not in {c.metric for c in cfg.constraints}
    view, wall = view_of(cfg)
    fresh, old = cfg.fleet.instances[0].id, cfg.fleet.instances[1].id
    for _ in range(10):  # ten seconds of scrapes (restarted 10 s before the first): every dwell has passed
        view.update(fresh, parse_engine_metrics(vllm(10)))
        view.update(old, parse_engine_metrics(vllm(3600)))
        view.tick()
        wall.at += timedelta(seconds=1)
    snaps = view.snapshot()
    assert snaps[fresh].latches and not any(latch.out for latch in snaps[fresh].latches)
    scores = build("warmup-scorer").score([candidate(fresh, warmup_progress=snaps[fresh].warmup_progress),
                                           candidate(old, warmup_progress=snaps[old].warmup_progress)], context())
    assert scores[0] == pytest.approx(snaps[fresh].warmup_progress) and scores[0] < 0.25 and scores[1] == 1.0


def test_a_warmup_constraint_holds_a_cold_instance_out_and_a_tgi_one_in() -> None:
    rule = {"name": "warm", "metric": "warmup_progress", "op": ">=", "threshold": 0.5, "exit_for": 0, "enter_for": 0}
    view, _ = view_of(make_config(constraints=[rule]))
    view.update("big-a", parse_engine_metrics(vllm(9)))  # vLLM, 9 s up: cold
    view.update("big-b", parse_engine_metrics("tgi_queue_size 0\ntgi_batch_current_size 0\n"))  # assumed warm
    view.update("small-a", parse_engine_metrics(vllm(600)))
    view.tick()
    out = {iid: any(latch.out for latch in s.latches) for iid, s in view.snapshot().items()}
    assert out == {"big-a": True, "big-b": False, "small-a": False}


def test_the_trace_records_where_the_warm_up_came_from() -> None:
    view, _ = view_of()
    view.update("big-a", parse_engine_metrics(vllm(45)))
    view.update("big-b", parse_engine_metrics("tgi_queue_size 0\ntgi_batch_current_size 0\n"))
    view.update("small-a", parse_engine_metrics(vllm(200, sim_warmup=0.7)))
    view.tick()
    _, trace = decide(view.snapshot(), now=NOW + timedelta(seconds=0.5))
    recorded = {c.instance: (c.state.warmup_progress, c.state.warmup_source) for c in trace.candidates if c.state}
    assert recorded == {"big-a": (pytest.approx(0.5), "uptime"), "big-b": (1.0, "assumed"), "small-a": (0.7, "gauge")}
    again = type(trace).model_validate_json(trace.model_dump_json())  # a stored trace reads back with it
    assert {c.instance: c.state.warmup_source for c in again.candidates if c.state} == {
        "big-a": "uptime", "big-b": "assumed", "small-a": "gauge"}


def test_the_scraper_derives_it_from_a_real_vllm_metrics_endpoint() -> None:
    async def run() -> list[InstanceSnapshot]:
        body = {"text": VLLM_FIXTURE}

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(text=body["text"])

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        server = TestServer(app)
        await server.start_server()
        cfg = make_config(fleet={"instances": [{"id": "v", "model": "m", "url": str(server.make_url("")).rstrip("/")}]})
        wall = Wall(datetime.fromtimestamp(VLLM_FIXTURE_START + 3600, tz=UTC))  # up for an hour
        view = StateView(cfg.fleet.instances, scrape=cfg.scrape, clock=lambda: 0.0, wall=wall)
        seen = []
        async with aiohttp.ClientSession() as session:
            scraper = MetricsScraper(cfg.fleet.instances, view, session, timeout_s=2)
            await scraper.scrape_once()
            seen.append(view.snapshot()["v"])
            restarted = VLLM_FIXTURE_START + 3600 - 18  # the process restarted 18 s ago
            body["text"] = VLLM_FIXTURE.replace("process_start_time_seconds 1.7181405583e+09",
                                                f"process_start_time_seconds {restarted!r}")
            assert body["text"] != VLLM_FIXTURE
            await scraper.scrape_once()
            seen.append(view.snapshot()["v"])
        await server.close()
        return seen

    up, restarted = asyncio.run(run())
    assert (up.warmup_progress, up.warmup_source) == (1.0, "uptime")
    assert (restarted.warmup_progress, restarted.warmup_source) == (pytest.approx(0.2), "uptime")
    assert restarted.scrape_error is None
