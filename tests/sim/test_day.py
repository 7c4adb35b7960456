"""The demo's day maps a drill timeline onto any fleet: an index takes the fleet's instance at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.day import fleet_instance_of
from sim.scenarios import load_scenario

DAY = Path(__file__).resolve().parents[2] / "app" / "run" / "demo_day.yaml"
SHIPPED = ["v4-32k-a", "v4-32k-b", "coder-6b-a", "coder-6b-b"]


def test_the_shipped_day_is_a_drill_file_whose_faults_land_on_the_shipped_fleet() -> None:
    day = load_scenario(DAY)
    where = fleet_instance_of(day, SHIPPED)
    assert {(where(f), f.kind.value) for f in day.faults} == {
        ("coder-6b-b", "crash"), ("coder-6b-a", "kv-pressure"), ("v4-32k-b", "drift")}
    # the drill's own fleet gets the same script by index
    assert [day.instance_of(f) for f in day.faults] == [day.instance_ids()[int(f.instance)] for f in day.faults]


def test_a_fleet_too_small_for_the_script_is_refused_up_front() -> None:
    day = load_scenario(DAY)
    with pytest.raises(ValueError, match="the fleet has 2 instances"):
        fleet_instance_of(day, SHIPPED[:2])


def test_an_id_the_fleet_lacks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "day.yaml"
    path.write_text("name: d\nduration_s: 10\nfaults: [{at_s: 1, instance: v4-32k-0, kind: crash}]\n")
    with pytest.raises(ValueError, match="no instance 'v4-32k-0'"):
        fleet_instance_of(load_scenario(path), SHIPPED)
    assert fleet_instance_of(load_scenario(path), ["v4-32k-0"])(load_scenario(path).faults[0]) == "v4-32k-0"
