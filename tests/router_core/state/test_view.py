from datetime import UTC, datetime, timedelta

import pytest

from router_core.state.histogram import delta_quantile
from router_core.state.parse import EngineGauges
from router_core.state.quality import QualityTable
from router_core.state.staleness import effective_state
from router_core.state.view import StateView
from router_core.state.window import ObservationWindow
from schemas.config import ModelProfile
from schemas.fleet import InstanceSnapshot
from tests.router_core.conftest import NOW, decide, healthy, make_config, snap


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0
        self.wall0 = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)

    def mono(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return self.wall0 + timedelta(seconds=self.t - 1000.0)


def gauges(kv: float, queue: float = 0) -> EngineGauges:
    return EngineGauges("vllm", queue, 1, kv, None)


def view_and_clock(**cfg: object) -> tuple[StateView, Clock]:
    config = make_config(**cfg)
    clock = Clock()
    view = StateView(config.fleet.instances, config.constraints, scrape=config.scrape, clock=clock.mono,
                     wall=clock.wall)
    return view, clock


def test_kv_breach_latches_after_the_dwell_and_releases_after_recovery() -> None:
    view, clock = view_and_clock(constraints=[{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85,
                                               "enter_below": 0.8, "exit_for": 2, "enter_for": 5}])
    def step(kv: float) -> bool:
        for iid in ("big-a", "big-b", "small-a"):
            view.update(iid, gauges(kv if iid == "big-a" else 0.1))
        view.tick()
        clock.t += 1.0
        return view.snapshot()["big-a"].latches[0].out

    assert [step(0.9) for _ in range(4)] == [False, False, True, True]  # out once 2 s above
    since = view.snapshot()["big-a"].latches[0].since
    assert since == clock.wall0 + timedelta(seconds=2)
    assert [step(0.82) for _ in range(6)] == [True] * 6  # between 80% and 85%: stays out
    assert [step(0.7) for _ in range(7)] == [True] * 5 + [False, False]  # back after 5 s below 80%


def test_metrics_that_stop_make_the_instance_suspect_then_out_and_it_recovers() -> None:
    view, clock = view_and_clock()
    for iid in ("big-a", "big-b", "small-a"):
        view.update(iid, gauges(0.1 if iid == "big-b" else 0.5))
    view.tick()
    ranked, _ = decide(view.snapshot(), now=clock.wall())
    assert ranked[0] == "big-b"
    # big-b's exporter freezes; the others keep reporting.
    for _ in range(6):
        clock.t += 1.0
        view.update("big-b", None, "TimeoutError")
        view.update("big-a", gauges(0.5))
        view.update("small-a", gauges(0.5))
        view.tick()
    snap = view.snapshot()["big-b"]
    assert snap.stale and snap.scrape_error == "TimeoutError"
    ranked, trace = decide(view.snapshot(), now=clock.wall())
    assert "big-b" not in ranked
    big_b = next(c for c in trace.candidates if c.instance == "big-b")
    assert "metrics 6.0s old (TimeoutError)" in big_b.violations[0].reason
    view.update("big-b", gauges(0.1))
    view.tick()
    assert decide(view.snapshot(), now=clock.wall())[0][0] == "big-b"


def test_router_observations_feed_error_rate_and_latency() -> None:
    view, clock = view_and_clock(constraints=[{"name": "errors", "metric": "error_rate", "threshold": 0.15,
                                               "enter_below": 0.05, "exit_for": 0}])
    view.update("big-a", gauges(0.1))
    for i in range(10):
        view.observe("big-a", 100.0 + i, ok=i % 4 != 0)  # 3 of 10 fail
    view.tick()
    snap = view.snapshot()["big-a"]
    assert snap.error_rate == pytest.approx(0.3) and snap.window_requests == 10
    # the latencies of the 7 answered only (100, 104 and 108 failed): 101..103, 105..107, 109
    assert snap.p50_latency_ms == 105.0 and snap.p95_latency_ms == 109.0
    assert snap.latches[0].out
    clock.t += 11  # the window forgets
    view.tick()
    assert view.snapshot()["big-a"].window_requests == 0


def test_views_summarise_models_and_cluster() -> None:
    view, _ = view_and_clock()
    for iid in ("big-a", "big-b", "small-a"):
        view.update(iid, gauges(0.2, queue=2))
    view.tick()
    views = view.views()
    assert views["models"]["big"]["instances"] == 2 and views["models"]["big"]["queue"] == 4
    assert views["cluster"]["in_feasible_set"] == 3 and len(views["instances"]) == 3


def test_views_age_the_data_at_request_time_even_when_no_tick_comes() -> None:
    view, clock = view_and_clock()
    for iid in ("big-a", "big-b", "small-a"):
        view.update(iid, gauges(0.2))
    view.tick()
    assert not any(i["stale"] for i in view.views()["instances"])
    clock.t += 60  # the scrape loop stalled: no update, no tick
    instances = view.views()["instances"]
    assert all(i["stale"] and i["age_s"] == 60 for i in instances)
    assert view.views()["cluster"]["in_feasible_set"] == 0
    assert not view.snapshot()["big-a"].stale  # the routing snapshots are the tick's, untouched


def test_out_of_range_gauges_never_reach_a_snapshot_and_adjustments_are_recorded() -> None:
    view, _ = view_and_clock()
    view.update("big-a", EngineGauges("vllm", -5, float("nan"), 1.7, -0.1,
                                      adjustments=("queue=-5 refused (negative)",)))
    view.tick()
    snap = view.snapshot()["big-a"]
    assert (snap.queue, snap.running, snap.kv_cache_usage) == (None, None, None)
    assert (snap.warmup_progress, snap.warmup_source) == (1.0, "assumed")  # -0.1 never lands; no start time either
    assert snap.scrape_error == "out_of_range: queue=-5 refused (negative)" and snap.scraped_at is not None
    InstanceSnapshot.model_validate(snap.model_dump(mode="json"))  # a stored copy validates when read back
    view.update("big-a", gauges(0.3, queue=1))
    assert view.snapshot()["big-a"].scrape_error is None


def test_a_stored_negative_backlog_counts_as_saturated_not_idle() -> None:
    cfg = make_config()
    bad = InstanceSnapshot.model_construct(instance="big-a", model="big", scraped_at=datetime(2026, 1, 1, tzinfo=UTC),
                                           queue=-5.0, running=float("nan"), kv_cache_usage=1.5)
    eff = effective_state(bad, datetime(2026, 1, 1, tzinfo=UTC), cfg.scrape, queue_cap=10)
    assert (eff.queue, eff.running, eff.kv_cache_usage) == (10, 10, 1.0)


def test_histogram_deltas_give_recent_percentiles() -> None:
    first = ((0.1, 10.0), (0.5, 10.0), (1.0, 10.0), (float("inf"), 10.0))
    second = ((0.1, 10.0), (0.5, 20.0), (1.0, 30.0), (float("inf"), 30.0))  # 20 new, all in (0.1, 1.0]
    assert delta_quantile(first, second, 0.5) == pytest.approx(0.5)
    assert delta_quantile(first, second, 0.95) == pytest.approx(0.5 + 0.5 * (19 - 10) / 10)
    assert delta_quantile(second, second, 0.95) is None  # nothing new
    # counters reset (engine restart): the current totals are the delta; 10 in (0, 0.1] interpolate to 0.05
    assert delta_quantile(second, first, 0.5) == pytest.approx(0.05)


def test_window_drops_old_observations() -> None:
    w = ObservationWindow(span_s=10)
    w.add(0.0, 50.0, True)
    w.add(5.0, 150.0, False)
    assert w.stats(9.0).requests == 2 and w.stats(12.0).requests == 1
    assert w.stats(30.0).error_rate is None


def test_quality_learns_from_feedback() -> None:
    table = QualityTable({"big": ModelProfile(quality={"math": 0.9})}, prior_strength=10)
    before = table.get("big", "math")
    for _ in range(10):
        table.update("big", "math", correct=False)
    assert before == pytest.approx(0.9) and table.get("big", "math") == pytest.approx(9 / 20)
    assert table.get("unknown", "math") == 0.5


def test_an_engine_without_a_kv_gauge_is_judged_by_its_queue_not_held_out_as_full() -> None:
    from router_core.state.staleness import effective_state
    from schemas.config import ScrapeSettings

    scrape = ScrapeSettings()
    tgi = snap("big-a", kv=None, queue=2, age=0.5).model_copy(update={"engine": "tgi"})
    vllm = snap("big-a", kv=None, queue=2, age=0.5).model_copy(update={"engine": "vllm"})
    assert effective_state(tgi, NOW, scrape, 10.0).kv_cache_usage == 0.0
    assert effective_state(vllm, NOW, scrape, 10.0).kv_cache_usage == 1.0  # vLLM without the gauge: unknown, full
    stale_tgi = tgi.model_copy(update={"scraped_at": NOW - timedelta(seconds=scrape.stale_after_s)})
    assert effective_state(stale_tgi, NOW, scrape, 10.0).kv_cache_usage == 1.0  # ageing still decays it
    ranked, _ = decide(healthy() | {"big-a": tgi})  # the default kv-cache constraint keeps it in
    assert "big-a" in ranked


def test_probe_verdicts_ride_in_the_snapshot_through_scrapes_and_ticks() -> None:
    from schemas.probe import ProbeStatus

    view, clock = view_and_clock()
    view.update("big-a", gauges(0.2))
    view.tick()
    before = view.snapshot()["big-a"]
    failed = ProbeStatus(kind="semantic", verdict="failed", since=clock.wall(), value=0.3, threshold=0.65)
    assert view.set_probe(failed, "big-a") and not view.set_probe(failed, "no-such-instance")
    after = view.snapshot()["big-a"]
    assert after is not before and before.probes == [] and after.probes == [failed]  # a new snapshot, old untouched
    view.set_probe(ProbeStatus(kind="latency", verdict="ok", since=clock.wall()), "big-a")
    clock.t += 1
    view.update("big-a", gauges(0.3))
    view.tick()
    assert [(p.kind, p.verdict) for p in view.snapshot()["big-a"].probes] == [("latency", "ok"), ("semantic", "failed")]
    assert view.views()["models"]["big"]["in_feasible_set"] == 0  # big-b was never scraped, big-a failed
    recovered = ProbeStatus(**{**failed.model_dump(), "verdict": "ok"})
    view.set_probe(recovered, "big-a")  # the same kind replaces, never accumulates
    assert [p.verdict for p in view.snapshot()["big-a"].probes if p.kind == "semantic"] == ["ok"]
    assert view.views()["models"]["big"]["in_feasible_set"] == 1


def test_the_gauges_said_to_decay_are_the_ones_a_suspect_snapshot_moves() -> None:
    """DECAYING_GAUGES (the demo says a broken kv-cache is stale metrics by it) names what effective_state moves."""
    from dataclasses import fields

    from router_core.framework.types import Effective
    from router_core.state.staleness import DECAYING_GAUGES

    assert {f.name for f in fields(Effective)} - {"age_s", "suspect"} == DECAYING_GAUGES
