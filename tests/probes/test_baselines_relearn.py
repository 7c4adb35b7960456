"""A latency baseline learned in a bad hour is dropped by an operator and learned again by the running prober.

A baseline is learned from an instance's first healthy probes and kept for good (a restart must not
relearn a degraded state as normal). So one learned during a fault (3,275 ms on an instance that
answers in 220 ms once it recovers), or before a planned change made a new normal, held the instance
``degraded`` for ever: nothing but deleting the file by hand, and restarting the prober, let it go.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

from app.cli import main
from probes.baselines import Baseline, BaselineStore
from probes.http import ChatCall
from probes.latency import LatencyTracker
from schemas.common import ProbeVerdict
from schemas.config.probes import LatencyProbeSettings

SETTINGS = LatencyProbeSettings()  # baseline from 10 probes, ±20%
WALL = datetime(2026, 12, 7, tzinfo=UTC)


def _ms(ms: float) -> ChatCall:
    return ChatCall(200, b"{}", ms)


def _learned(path: Path, around: float) -> LatencyTracker:
    tracker, rng = LatencyTracker(SETTINGS, BaselineStore(path), wall=lambda: WALL), random.Random(3)
    for _ in range(SETTINGS.baseline_probes):
        tracker.observe("a", _ms(around + rng.uniform(-3, 3)))
    assert tracker.store.get("a") is not None
    return tracker


def test_a_baseline_dropped_by_another_process_is_learned_again_from_the_next_probes(tmp_path: Path) -> None:
    path = tmp_path / "traces.duckdb.probe-baselines.json"
    tracker = _learned(path, 3275.0)  # learned during a fault
    recovered = [tracker.observe("a", _ms(220)) for _ in range(SETTINGS.window)]
    assert recovered[-1].verdict is ProbeVerdict.DEGRADED  # recovered, and judged off its baseline for good
    assert BaselineStore(path).forget("a")  # the operator's command, another process
    first = tracker.observe("a", _ms(221))
    assert first.verdict is ProbeVerdict.OK and first.reason == "learning baseline (1/10)"
    for _ in range(SETTINGS.baseline_probes - 1):
        last = tracker.observe("a", _ms(220))
    assert last.verdict is ProbeVerdict.OK and last.reason == ""  # the recovered latency is the new normal
    base = BaselineStore(path).get("a")
    assert base is not None and 219 <= base.p95_ms <= 222  # persisted: a restart keeps the new one


def test_the_prober_writing_another_baseline_does_not_bring_a_dropped_one_back(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    store = BaselineStore(path)
    store.set("a", Baseline(3275.0, 3300.0, 10, "then"))
    BaselineStore(path).forget("a")  # meanwhile, another process
    store.set("b", Baseline(100.0, 110.0, 10, "now"))  # the prober learns b: it reads the file first
    assert set(BaselineStore(path).all()) == {"b"} and store.take_dropped() == {"a"}


def test_a_removed_file_drops_every_baseline(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    tracker = _learned(path, 100.0)
    path.unlink()
    assert tracker.observe("a", _ms(100)).reason == "learning baseline (1/10)"


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(f'storage: {{duckdb_path: "{tmp_path / "traces.duckdb"}"}}\n'
                   'fleet: {instances: [{id: a, model: m, url: "http://127.0.0.1:9"}]}\n', "utf-8")
    return cfg


def test_the_command_lists_and_forgets_baselines(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    cfg = _config(tmp_path)
    store = BaselineStore(tmp_path / "traces.duckdb.probe-baselines.json")
    store.set("a", Baseline(3275.0, 3300.5, 10, "2026-12-07T08:00:00+00:00"))
    store.set("b", Baseline(100.0, 110.0, 10, "2026-12-07T08:00:00+00:00"))
    assert main(["--config", str(cfg), "probes", "baselines"]) == 0
    out = capsys.readouterr().out
    assert "3300.5" in out and "110.0" in out and "2026-12-07T08:00:00+00:00" in out
    assert main(["--config", str(cfg), "probes", "baselines", "--forget", "c"]) == 2
    err = capsys.readouterr().err
    assert "no latency baseline for c" in err and "it has: a, b" in err
    assert main(["--config", str(cfg), "probes", "baselines", "--forget", "a"]) == 0
    assert "learns it again from the next 10 healthy probes" in capsys.readouterr().err
    assert main(["--config", str(cfg), "probes", "baselines", "--json"]) == 0
    assert '"baselines": {"b":' in capsys.readouterr().out
    assert main(["--config", str(cfg), "probes", "baselines", "--forget-all"]) == 0
    assert BaselineStore(tmp_path / "traces.duckdb.probe-baselines.json").all() == {}
