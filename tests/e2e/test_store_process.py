"""``routelens serve`` with one worker: the trace store in a process of its own by default, or in-process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port, stat_fields
from bench.drain import store_url_of
from bench.stage_budget import store_pid
from tests.e2e.conftest import ROOT, Proc
from tests.e2e.net import call, metrics
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
PY = [sys.executable, "-m", "app"]
BODY = {"model": "auto", "messages": [{"role": "user", "content": "classify: refund failed"}], "max_tokens": 8}


def _alive(pid: int) -> bool:
    return (fields := stat_fields(pid)) is not None and fields[0] != "Z"


def _holds(store_url: str, rid: str) -> bool:
    """Whether the store at ``store_url`` answers for ``rid`` (False while nothing listens there)."""
    try:
        return call("GET", f"{store_url}/v1/traces/{rid}")[0] == 200
    except OSError:
        return False


def _store_written(url: str) -> float | None:
    """``routelens_store_records_written_total{kind="trace"}`` on the gateway's ``/metrics`` (None: absent)."""
    return metrics(url).get(("routelens_store_records_written_total", frozenset({("kind", "trace")})))


def _post(url: str) -> str:
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(BODY).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.status == 200
        return str(resp.headers["x-request-id"])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """One simulated instance, and a config for a gateway in front of it (the port, the trace file)."""
    folder = tmp_path_factory.mktemp("store-process")
    port, inst = free_port(), free_port()
    cfg = folder / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(folder / "traces.duckdb"), "flush_interval_ms": 20},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"enabled": False},
    }))
    sim = Proc([*PY, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])
    try:
        sim.wait_for("fleet ready")
        yield cfg, port
    finally:
        sim.stop()


def test_one_worker_relays_to_a_store_process_it_starts_and_ends(fleet: tuple[Path, int]) -> None:
    cfg, port = fleet
    gateway = Proc([*PY, "serve", "--config", str(cfg), "--workers", "1"])  # the shipped default: a store process
    try:
        gateway.wait_for("gateway ready http")
        store_url = store_url_of("".join(gateway.lines))
        assert store_url is not None, "".join(gateway.lines)
        store = store_pid(gateway.proc.pid)
        assert store is not None
        url = f"http://127.0.0.1:{port}"
        ids = [_post(url) for _ in range(5)]
        for rid in ids:  # the store process holds each trace, and the gateway's port answers for it
            assert wait_until(lambda rid=rid: _holds(store_url, rid), 20), rid
            status, trace = call("GET", f"{url}/v1/traces/{rid}")
            assert status == 200 and trace["request_id"] == rid
        # the store's own series, on the gateway's /metrics (Prometheus scrapes the gateway only)
        assert (_store_written(url) or 0) >= 5
    finally:
        assert gateway.stop() == 0
    assert wait_until(lambda: not _alive(store), 10), "the store process outlived serve"


def test_a_store_process_that_dies_is_started_again(fleet: tuple[Path, int]) -> None:
    cfg, port = fleet
    gateway = Proc([*PY, "serve", "--config", str(cfg), "--workers", "1"])
    try:
        gateway.wait_for("gateway ready http")
        store_url = store_url_of("".join(gateway.lines))
        first = store_pid(gateway.proc.pid)
        assert store_url is not None and first is not None
        os.kill(first, signal.SIGKILL)  # an OOM kill, say
        assert wait_until(lambda: store_pid(gateway.proc.pid) not in (None, first), 30), "".join(gateway.lines)
        url = f"http://127.0.0.1:{port}"
        rid = _post(url)  # answered whatever the store's state, and stored once it is back (on the same port)
        assert wait_until(lambda: _holds(store_url, rid), 30), "".join(gateway.lines)
        assert any("the store process exited (code -9); starting it again" in line for line in gateway.lines)
        again = store_pid(gateway.proc.pid)
    finally:
        assert gateway.stop() == 0
    assert again is not None and wait_until(lambda: not _alive(again), 10), "the new store outlived serve"


def test_store_in_process_keeps_one_process(fleet: tuple[Path, int]) -> None:
    cfg, port = fleet
    gateway = Proc([*PY, "serve", "--config", str(cfg), "--store-in-process"])  # one worker, whatever the cores
    try:
        gateway.wait_for("gateway ready http")
        assert store_url_of("".join(gateway.lines)) is None
        assert store_pid(gateway.proc.pid) is None
        url = f"http://127.0.0.1:{port}"
        rid = _post(url)
        assert wait_until(lambda: call("GET", f"{url}/v1/traces/{rid}")[0] == 200, 20)
        status, trace = call("GET", f"{url}/v1/traces/{rid}")
        assert status == 200 and trace["request_id"] == rid
        assert _store_written(url) is None  # no store process to republish
    finally:
        assert gateway.stop() == 0


def test_store_in_process_with_workers_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]},
                                   "storage": {"duckdb_path": str(tmp_path / "t.duckdb")}}))
    run = subprocess.run([*PY, "--config", str(cfg), "serve", "--workers", "2", "--store-in-process"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--store-in-process runs one worker" in run.stderr
    assert not (tmp_path / "t.duckdb").exists()  # refused before anything was opened
