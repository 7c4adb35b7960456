"""Every shipped drill runs to a report: fleet and gateway as real processes, traffic, faults.

The six drills run at once, each ``--speed 8`` (a 40 s drill takes 5 s), so the module costs
about as much as the slowest one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.scenarios import load_scenario

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "sim" / "scenarios").glob("*.yaml"))
SPEED = 8


@pytest.fixture(scope="module")
def drills(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[int, str, dict[str, Any]]]]:
    out = tmp_path_factory.mktemp("drills")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done: dict[str, tuple[int, str, dict[str, Any]]] = {}
    # One drill at a time: each picks free loopback ports for its fleet and gateway, and drills
    # started together could race for the same port (and share two cores with five others).
    for p in SCENARIOS:
        proc = subprocess.run([sys.executable, "-m", "app", "drill", "run", str(p), "--speed", str(SPEED),
                               "--out", str(out / p.stem)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)
        report_path = out / p.stem / "report.json"
        report = json.loads(report_path.read_text()) if report_path.is_file() else {}
        report["out"] = str(out / p.stem)
        done[p.stem] = (proc.returncode, proc.stdout, report)
    yield done


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_each_shipped_drill_runs_to_a_report(drills, path: Path) -> None:
    code, stdout, report = drills[path.stem]
    assert code == 0, stdout
    scenario = load_scenario(path)
    assert f"drill {scenario.name}: " in stdout and "report: " in stdout
    assert report["scenario"] == scenario.name and report["speed"] == SPEED
    assert report["requests"] > 0 and report["overall"]["latency_ms"]["p50"] is not None
    assert report["feedback_accepted"] == report["requests"] and report["inject_errors"] == []
    assert len(report["served_by"]) >= 2
    # each timeline fault was recorded by the simulator, with its start (and end, when it has a duration)
    assert sorted((f["instance"], f["kind"]) for f in report["faults"]) == sorted(
        (scenario.instance_of(f), f.kind.value) for f in scenario.faults)
    for fault, planned in zip(sorted(report["faults"], key=lambda f: f["onset_s"]),
                              sorted(scenario.scaled(SPEED).faults, key=lambda f: f.at_s), strict=True):
        assert fault["onset_s"] >= planned.at_s
        if planned.duration_s is not None:
            assert fault["end_reason"] == "duration"
            assert fault["end_s"] - fault["onset_s"] == pytest.approx(planned.duration_s, abs=0.01)
        assert f"fault {fault['kind']} on {fault['instance']}" in stdout


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_each_drill_ends_with_its_decisions_verified_under_their_own_policy(drills, path: Path) -> None:
    _, stdout, report = drills[path.stem]
    verify = json.loads((Path(report["out"]) / "verify.json").read_text())
    assert "replay --verify: " in stdout and verify["mismatches"] == [] and verify["mismatched"] == 0
    assert verify["n"] >= report["requests"] * 0.9 and verify["reproduced"] >= verify["n"] * 0.9, verify
    assert verify["policies"] == 1


def test_a_crash_drill_with_open_breakers_is_verified(tmp_path: Path) -> None:
    """The crashed instance's breaker opens, and the decisions it shaped are re-decided the same.

    The shipped drill's metrics go stale within 0.75 s at ``--speed 4``, often before three requests
    have failed there; this copy of it trusts metrics for 20 s (5 s at speed 4), so the breaker is what
    takes the instance out.
    """
    import duckdb
    import yaml

    doc = yaml.safe_load((ROOT / "sim" / "scenarios" / "crash.yaml").read_text())
    doc["gateway"]["scrape"].update(suspect_after_s=20, stale_after_s=20)
    scenario = tmp_path / "crash-slow-staleness.yaml"
    scenario.write_text(yaml.safe_dump(doc))
    out = tmp_path / "crash"
    proc = subprocess.run([sys.executable, "-m", "app", "drill", "run", str(scenario),
                           "--speed", "4", "--out", str(out)], cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout
    verify = json.loads((out / "verify.json").read_text())
    assert verify["mismatched"] == 0 and verify["reproduced"] > 0, verify
    con = duckdb.connect(str(out / "traces.duckdb"), read_only=True)
    ((blocked,),) = con.execute("SELECT count(*) FROM traces WHERE len(inputs.blocked) > 0").fetchall()
    con.close()
    assert blocked > 0, proc.stdout  # decisions the open breaker shaped, each reproduced above


def test_a_crashed_instance_serves_nothing_while_down(drills) -> None:
    _, _, report = drills["crash"]
    (crash,) = report["faults"]
    requests = [json.loads(line) for line in (Path(report["out"]) / "requests.jsonl").read_text().splitlines()]
    # Away from the edges of the window, nothing was answered by the crashed instance. The onset is
    # timed by the simulator and sent_at by the traffic process: 0.5 s absorbs their scheduling skew
    # on a loaded 2-core machine.
    inside = [r for r in requests if crash["onset_s"] + 0.5 <= r["sent_at_s"] <= crash["end_s"] - 0.5]
    assert inside and not [r for r in inside if r["instance"] == crash["instance"]]
    assert report["overall"]["errors"] <= crash["sent_after_onset"]  # the gateway retried the rest elsewhere


def test_the_surge_report_compares_before_during_and_after(drills) -> None:
    _, stdout, report = drills["surge"]
    surge = report["surge"]
    assert surge["during"]["requests"] > 3 * surge["before"]["requests"]
    assert "surge/during" in stdout


def test_the_leak_lasts_to_the_end_and_drift_keeps_answering(drills) -> None:
    (leak,) = drills["leak"][2]["faults"]
    assert leak["end_s"] is None and leak["kind"] == "leak"
    drift_report = drills["drift"][2]
    (drift,) = drift_report["faults"]
    assert drift["window"]["errors"] == 0  # drift is silent at the HTTP level


def test_a_drill_with_its_default_out_folder_verifies_its_decisions(tmp_path: Path) -> None:
    """Run from a folder of the user's, ``--out`` not given: the traces land where the verify step reads them.

    (Its config named the trace file by a relative path, read against the config's own folder, so
    the traces went one ``.routelens/drills/...`` deeper and the verify step found none.)
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "app", "drill", "run", str(ROOT / "sim" / "scenarios" / "crash.yaml"),
                           "--speed", str(SPEED)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout
    (out,) = (tmp_path / ".routelens" / "drills").iterdir()
    verify = json.loads((out / "verify.json").read_text())
    assert "replay --verify: " in proc.stdout and verify["reproduced"] > 0 and verify["mismatched"] == 0, verify
    assert not (out / ".routelens").exists()
