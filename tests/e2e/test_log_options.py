"""``--log-level``/``--log-format`` on real processes: ``routelens store`` alone, and ``serve`` handing them on.

``store --log-format json --log-level info`` writes its log records as JSON lines; ``serve`` run
with ``ROUTELENS_LOG_LEVEL=debug`` and ``--log-format json`` logs at debug in JSON in every process it
starts (a worker, the store, the prober), whose lines it relays as they are; a bad value is refused
naming the flag or the variable, before anything listens.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.run.logs import FORMAT_ENV, LEVEL_ENV
from app.run.procs import free_port, free_ports, port_is_free
from tests.e2e.conftest import ROOT, Proc
from tests.polling import wait_until
from tests.redis_server import REDIS_SERVER

pytestmark = pytest.mark.e2e
PY = [sys.executable, "-m", "app"]
KEYS = {"ts", "level", "logger", "message", "process"}
TEXT_RECORD = re.compile(r"^(\[[\w-]+\] )?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR) ")


def records(lines: list[str]) -> list[dict[str, Any]]:
    """Every JSON line, parsed, each checked for the keys a line has."""
    out = [json.loads(line) for line in lines if line.startswith("{")]
    for rec in out:
        assert KEYS <= set(rec) <= KEYS | {"exc", "stack"}, rec
        assert datetime.fromisoformat(rec["ts"]).utcoffset() == UTC.utcoffset(None), rec
    return out


def store_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")}, "probes": {"enabled": False},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]},
    }))
    return cfg


def test_the_store_writes_json_lines_at_info(tmp_path: Path) -> None:
    cfg = store_config(tmp_path)
    store = Proc([*PY, "--config", str(cfg), "store", "--port", str(free_port()),
                  "--log-format", "json", "--log-level", "info"])
    try:
        store.wait_for("store ready http")
        # the pipeline's start is said at INFO (unseen at the default warning)
        assert wait_until(lambda: any("thread switch interval" in r["message"] for r in records(store.lines)), 10)
    finally:
        store.stop()
    found = records(store.lines)
    assert {r["process"] for r in found} == {"store"}
    assert {r["level"] for r in found} <= {"info", "warning", "error"}  # nothing at debug
    said = next(r for r in found if "thread switch interval" in r["message"])
    assert said["level"] == "info" and said["logger"] == "ingest.pipeline.emitter"
    assert not [line for line in store.lines if TEXT_RECORD.match(line)], store.lines  # no record as text


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server not found: serve runs one worker without it")
def test_serve_hands_the_variable_and_the_flag_to_its_worker_store_and_prober(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port, inst = free_ports(2)
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"interval_s": 5, "kinds": ["syntax"]},  # a prober process, no embedding model to load
    }))
    fleet = Proc([*PY, "--config", str(cfg), "sim", "fleet", "--instances", "1", "--base-port", str(inst),
                  "--zero-delay"])
    serve = None
    try:
        fleet.wait_for("fleet ready")
        monkeypatch.setenv(LEVEL_ENV, "debug")  # the variable for the level, the flag for the format
        monkeypatch.delenv(FORMAT_ENV, raising=False)
        serve = Proc([*PY, "--config", str(cfg), "serve", "--workers", "2", "--log-format", "json"])
        serve.wait_for("gateway ready http")
        wanted = {"serve", "gateway-1", "store", "prober"}

        def at_debug() -> set[str]:  # each process says, at debug, how it logs
            return {r["process"] for r in records(serve.lines)
                    if r["logger"] == "app.run.logs" and r["message"] == f"logging at debug in json as {r['process']}"}

        assert wait_until(lambda: at_debug() >= wanted, 20), serve.lines
    finally:
        if serve is not None:
            serve.stop()
        fleet.stop()
    assert not [line for line in serve.lines if TEXT_RECORD.match(line)], serve.lines  # every record as JSON
    assert {r["process"] for r in records(serve.lines)} <= wanted


@pytest.mark.parametrize(("argv", "env", "named"), [
    (["--log-level", "verbose"], {}, "argument --log-level: invalid choice: 'verbose'"),
    ([], {LEVEL_ENV: "verbose"}, f"error: {LEVEL_ENV}='verbose' is not a log level"),
    ([], {FORMAT_ENV: "yaml"}, f"error: {FORMAT_ENV}='yaml' is not a log format"),
], ids=["flag", "level-variable", "format-variable"])
def test_a_bad_value_is_refused_naming_it_and_nothing_listens(
        tmp_path: Path, argv: list[str], env: dict[str, str], named: str) -> None:
    cfg, port = store_config(tmp_path), free_port()
    base = {k: v for k, v in os.environ.items() if k not in (LEVEL_ENV, FORMAT_ENV)}
    done = subprocess.run([*PY, "--config", str(cfg), "store", "--port", str(port), *argv], cwd=ROOT,
                          env={**base, **env}, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stdout + done.stderr
    assert named in " ".join(done.stderr.split()), done.stderr
    assert "store ready" not in done.stdout and port_is_free("127.0.0.1", port)
    assert not (tmp_path / "traces.duckdb").exists()  # refused before the store was opened
