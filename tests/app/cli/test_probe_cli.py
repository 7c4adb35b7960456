"""``routelens probe URL`` and ``routelens probes calibrate`` against simulated instances on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web

import probes.embedder
from app.cli import main
from probes.references import load_references
from schemas.config.sim import SimModelProfile, SimSettings
from schemas.fleet import InstanceSpec
from sim.faults import FaultSpec
from sim.server import INSTANCE_KEY, build_instance_app


@contextmanager
def instance(instance_id: str = "sim-a", fault: dict[str, str] | None = None) -> Iterator[str]:
    """A simulated instance served from a thread of its own (the CLI runs its own event loop)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        spec = InstanceSpec(id=instance_id, model="sim-model", url="http://127.0.0.1:0", context_window=4096)
        app = build_instance_app(spec, SimModelProfile(), SimSettings(zero_delay=True, seed=5, warm_start=True))
        if fault is not None:
            app[INSTANCE_KEY].inject(FaultSpec.model_validate(fault))
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        holder["runner"], holder["url"] = runner, f"http://127.0.0.1:{runner.addresses[0][1]}"
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    ready.wait(10)
    try:
        yield str(holder["url"])
    finally:
        asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(10)  # type: ignore[attr-defined]
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture(scope="module")
def shared_embedder() -> probes.embedder.MiniLMEmbedder:
    return probes.embedder.MiniLMEmbedder()


@pytest.fixture(autouse=True)
def _one_embedder(monkeypatch: pytest.MonkeyPatch, shared_embedder, tmp_path) -> None:
    monkeypatch.setattr(probes.embedder, "MiniLMEmbedder", lambda: shared_embedder)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: default probe settings


def test_probe_syntax_json_prints_one_result_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with instance() as url:
        code = main(["probe", url, "--kind", "syntax", "--json"])
    doc = json.loads(capsys.readouterr().out)  # exactly one JSON object
    assert code == 0
    assert {"kind", "instance", "verdict", "value", "threshold", "reason"} <= set(doc)
    assert (doc["kind"], doc["instance"], doc["model"], doc["verdict"]) == ("syntax", url, "sim-model", "ok")


def test_probe_garbage_exits_1_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    with instance(fault={"kind": "garbage"}) as url:
        code = main(["probe", url, "--kind", "syntax", "--json", "--instance", "a"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["verdict"] == "failed" and doc["instance"] == "a"
    assert doc["reason"].startswith(("body is not JSON", "content is garbled"))


def test_probe_semantic_drift_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with instance(fault={"kind": "drift"}) as url:
        code = main(["probe", url, "--kind", "semantic", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["verdict"] == "failed" and doc["error_class"] == "drift" and doc["reference"]


def test_probe_all_kinds_prints_a_list_or_text(capsys: pytest.CaptureFixture[str]) -> None:
    with instance() as url:
        assert main(["probe", url, "--json"]) == 0
        docs = json.loads(capsys.readouterr().out)
        assert [d["kind"] for d in docs] == ["syntax", "latency", "semantic"]
        assert all(d["verdict"] == "ok" for d in docs)
        assert main(["probe", url]) == 0
    text = capsys.readouterr().out
    assert "syntax" in text and "learning baseline (1/10)" in text and "semantic" in text


def test_probe_unreachable_instance_is_a_failed_probe(capsys: pytest.CaptureFixture[str]) -> None:
    """An instance that gives no answer fails every probe (docs/on-call.md): exit 1, with or without --model."""
    from app.run.procs import free_port

    assert main(["probe", f"http://127.0.0.1:{free_port()}", "--kind", "syntax"]) == 1
    assert "cannot connect" in capsys.readouterr().out


def test_calibrate_prints_and_writes_thresholds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "refs.yaml"
    with instance("sim-a") as a, instance("sim-b") as b, instance("sim-c", fault={"kind": "drift"}) as bad:
        code = main(["probes", "calibrate", "--url", a, "--url", b, "--drifted-url", bad, "--samples", "2",
                     "--json", "--write", str(out)])
    rows = json.loads(capsys.readouterr().out)
    refs = load_references(out)
    assert code == 0 and [r["reference"] for r in rows] == [r.id for r in refs]
    for row, ref in zip(rows, refs, strict=True):
        assert row["healthy_n"] == 4 and row["drifted_n"] == 2 and row["separation"] > 0
        assert ref.threshold == row["suggested"] and row["drifted_max"] < ref.threshold < row["healthy_min"]


def test_the_calibration_table_keeps_its_cells_whole_in_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    """Written to a file or a pipe (not a terminal), the table is wide enough for every reference and figure."""
    with instance("sim-a") as a:
        assert main(["probes", "calibrate", "--url", a, "--samples", "1"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out and "separation" in out and "suggested" in out


def test_a_fleet_instance_is_probed_under_its_id_against_the_probers_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On-call confirms a latency page from the command line: the URL alone learned afresh and said ok."""
    from probes.baselines import _VERSION

    with instance() as url:
        (tmp_path / "routelens.yaml").write_text(
            "fleet:\n  instances:\n"
            f"    - {{id: coder-b, model: sim-model, url: '{url}'}}\n"
            "storage:\n  duckdb_path: data/t.duckdb\n")
        (tmp_path / "data").mkdir()
        baselines = tmp_path / "data" / "t.duckdb.probe-baselines.json"
        doc = {"version": _VERSION, "baselines": {"coder-b": {"p50_ms": 0.001, "p95_ms": 0.001, "samples": 10,
                                                              "learned_at": "2026-12-01T00:00:00+00:00"}}}
        baselines.write_text(json.dumps(doc))
        before = baselines.read_text()
        code = main(["probe", url, "--kind", "latency", "--json", "--config", "routelens.yaml"])
        got = json.loads(capsys.readouterr().out)
        assert code == 1 and got["instance"] == "coder-b" and got["verdict"] != "ok"
        assert "learning" not in got["reason"]
        assert baselines.read_text() == before  # read, never written
        code = main(["probe", url, "--kind", "latency", "--json", "--config", "routelens.yaml", "--instance", "other"])
        got = json.loads(capsys.readouterr().out)
        assert code == 0 and got["instance"] == "other" and "learning" in got["reason"]  # no baseline for "other"
