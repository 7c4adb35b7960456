"""Scenario files: the shipped ones load, mistakes name file, line and field, the timeline runs on time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.yamlconf import parse_yaml_model
from sim.faults import FaultKind, FaultSpec
from sim.scenarios import Scenario, load_scenario, run_timeline

SHIPPED = sorted((Path(__file__).resolve().parents[2] / "sim" / "scenarios").glob("*.yaml"))
GOOD = """\
name: tiny
duration_s: 20
fleet: {instances: 2}
faults:
  - {at_s: 5, instance: 1, kind: slow, factor: 3, duration_s: 4}
  - {at_s: 2, instance: v4-32k-0, kind: leak}
"""


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
@pytest.mark.parametrize("speed", [1, 8, 100])
def test_generated_configs_survive_the_yaml_round_trip_the_children_make(path, speed):
    config = load_scenario(path).scaled(speed).config(0)
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    assert parse_yaml_model(RouteLensConfig, text, "generated.yaml") == config


def test_the_six_drills_ship_and_load():
    assert {p.stem for p in SHIPPED} >= {"crash", "error-burst", "drift", "leak", "surge", "flapping"}
    for path in SHIPPED:
        scenario = load_scenario(path)
        assert scenario.name == path.stem and scenario.description
    kinds = {f.kind for p in SHIPPED for f in load_scenario(p).faults}
    assert {FaultKind.CRASH, FaultKind.ERROR, FaultKind.DRIFT, FaultKind.LEAK, FaultKind.FLAP} <= kinds
    assert load_scenario(next(p for p in SHIPPED if p.stem == "surge")).traffic.curve.surge_multiplier == 10


@pytest.mark.parametrize(("text", "line", "field"), [
    (GOOD.replace("instance: 1,", "instance: 7,"), 5, "faults[0].instance"),
    (GOOD.replace("instance: v4-32k-0", "instance: nope-9"), 6, "faults[1].instance"),
    (GOOD.replace("kind: leak", "kind: meltdown"), 6, "faults[1].kind"),
    (GOOD.replace("at_s: 5", "at_s: 50"), 5, "faults[0].at_s"),
    (GOOD.replace("duration_s: 20", "duration_s: -1"), 2, "duration_s"),
    (GOOD + "traffic: {curve: {kind: surge}}\n", 7, "traffic.curve"),
    (GOOD + "surprise: 1\n", 7, "surprise"),
])
def test_mistakes_name_file_line_and_field(tmp_path, text, line, field):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    assert f"{path}:{line}: {field}:" in str(info.value), str(info.value)


def test_yaml_syntax_errors_name_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nfaults: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="broken.yaml"):
        load_scenario(path)


def _tiny(tmp_path) -> Scenario:
    path = tmp_path / "tiny.yaml"
    path.write_text(GOOD, encoding="utf-8")
    return load_scenario(path)


def test_config_and_scaling(tmp_path):
    scenario = _tiny(tmp_path)
    assert scenario.instance_ids() == ["v4-32k-0", "coder-fp16-1"]
    config = scenario.config(0)
    assert config.sim.warm_start and config.scrape == scenario.gateway.scrape
    fast = scenario.scaled(4)
    assert fast.duration_s == 5 and fast.fleet.time_scale == 4
    assert [(f.at_s, f.duration_s) for f in fast.faults] == [(1.25, 1.0), (0.5, None)]
    assert fast.faults[1].rate == pytest.approx(0.8)  # the default leak, four times faster
    assert fast.gateway.scrape.interval_s == pytest.approx(0.125)


def test_run_timeline_injects_in_time_order(tmp_path):
    scenario = _tiny(tmp_path)
    now = [0.0]
    injected: list[tuple[float, str, str]] = []

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    async def inject(instance: str, spec: FaultSpec) -> None:
        injected.append((now[0], instance, spec.kind.value))

    asyncio.run(run_timeline(scenario, inject, lambda: now[0], sleep))
    assert injected == [(2.0, "v4-32k-0", "leak"), (5.0, "coder-fp16-1", "slow")]
