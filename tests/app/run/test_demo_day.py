"""The demo's configuration: the shipped one paced for a day of minutes, and sped up with --speed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import load_config
from app.run.demo_day import DEFAULT_SCRIPT, demo_config, load_day
from schemas.config import RouteLensConfig

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def shipped() -> RouteLensConfig:
    return load_config(ROOT / "routelens.yaml")


def test_at_speed_1_probes_come_every_few_seconds_and_drifted_instances_return_sooner(shipped) -> None:
    cfg = demo_config(shipped)
    assert shipped.probes.interval_s == 30 and cfg.probes.interval_s == 5
    assert cfg.probes.hysteresis.recover_m == 3 and cfg.probes.latency.tolerance == 1.0
    assert cfg.constraints == shipped.constraints and cfg.scrape == shipped.scrape
    assert cfg.experiments == shipped.experiments  # the shipped arms and shadow are the demo's
    assert cfg.sim.warm_start and cfg.sim.time_scale == shipped.sim.time_scale


def test_the_simulated_models_answer_as_the_built_in_mix_where_the_config_says_nothing(shipped) -> None:
    cfg = demo_config(shipped)
    coder, big = cfg.sim.models["deepseek-coder-6b-fp16"], cfg.sim.models["deepseek-v4-32k"]
    assert coder.accuracy["contract"] < big.accuracy["contract"] and big.cost_class == "premium"
    assert coder.decode_tps == shipped.sim.models["deepseek-coder-6b-fp16"].decode_tps  # what it sets, it keeps


def test_speed_divides_every_timer_the_day_depends_on(shipped) -> None:
    cfg = demo_config(shipped, speed=5)
    kv = {c.name: c for c in cfg.constraints}["kv-cache"]
    assert (kv.exit_for, kv.enter_for, kv.threshold) == (2 / 5, 5 / 5, 0.85)
    assert cfg.probes.interval_s == 1.0 and cfg.sim.time_scale == 5 * shipped.sim.time_scale
    assert cfg.resilience.breakers.instance.open_s == shipped.resilience.breakers.instance.open_s / 5
    assert cfg.scrape.interval_s == shipped.scrape.interval_s / 5
    # a crash is for the breaker to find: metrics are not stale sooner than 2 s, whatever the speed
    assert cfg.scrape.stale_after_s == 2.0 and cfg.scrape.suspect_after_s <= cfg.scrape.stale_after_s
    # latency baselines learned at x5 would make the answers at x1 look five times slow: kept apart, and
    # apart from serve's (learned on another load)
    assert cfg.probes.latency.state_path == f"{shipped.storage.duckdb_path}.probe-baselines-demo-x5.json"
    assert demo_config(shipped).probes.latency.state_path == f"{shipped.storage.duckdb_path}.probe-baselines-demo.json"


def test_a_config_without_an_experiment_gets_two_arms_and_a_shadow(shipped) -> None:
    cfg = demo_config(shipped.model_copy(update={"experiments": None}))
    assert cfg.experiments is not None and [a.name for a in cfg.experiments.arms] == ["balanced", "seed-score"]
    assert cfg.experiments.shadow is not None and cfg.experiments.shadow.sample == 0.25


def test_the_day_at_speed_keeps_each_instance_as_busy() -> None:
    day, fast = load_day(DEFAULT_SCRIPT, 1), load_day(DEFAULT_SCRIPT, 4, rps=3)
    assert fast.duration_s == day.duration_s / 4 and fast.traffic.curve.rps == 3 * 4
    assert [f.at_s for f in fast.faults] == [f.at_s / 4 for f in day.faults]
