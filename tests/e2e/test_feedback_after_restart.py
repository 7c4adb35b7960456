"""Real processes: a second verdict on a request judged before ``serve`` restarted is a 409.

The gateway's claims (which request ids have a verdict) start again with it; the store keeps the
first verdict per request and quarantined a second one, which the restarted gateway used to
answer 202 (accepted, learned, then thrown away). ``serve --workers 1`` with its store process
over a DuckDB folder, a simulated instance, all on loopback. A verdict reads back through the
gateway as soon as it is posted (the gateway delivers what it holds before it asks the store).
After a crash the first verdict may not be written yet: still in the store's pipeline (relayed,
its spool replayed by the new store) or in the gateway's spool (not relayed yet); a second verdict
right after the restart, before the store's next write, is a 409 all the same.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import duckdb
import pytest
import yaml

from app.run.procs import free_port, stat_fields
from bench.stage_budget import store_pid
from tests.e2e.conftest import Proc
from tests.e2e.net import call
from tests.polling import wait_until
from tests.promtext import samples

pytestmark = pytest.mark.e2e
CHAT = {"model": "auto", "messages": [{"role": "user", "content": "what is the capital of France?"}]}


def _chat(gateway: str) -> str:
    """One answered request; its request id."""
    req = urllib.request.Request(f"{gateway}/v1/chat/completions", data=json.dumps(CHAT).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
        assert resp.status == 200
        return str(resp.headers["x-request-id"])


def _stored(gateway: str, request_id: str) -> list[dict[str, Any]]:
    """The verdicts the store holds on ``request_id`` (through the gateway's query API)."""
    status, body = call("GET", f"{gateway}/v1/feedback?{urlencode({'request_id': request_id})}")
    assert status == 200, body
    return list(body["feedback"])


def _commands(tmp_path: Path, port: int, inst: int, storage: dict[str, object]) -> tuple[list[str], list[str]]:
    """The test's own config (a simulated instance, no probes, ``storage``): ``(sim fleet, serve)`` commands."""
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": storage,
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"enabled": False},
    }))
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    return [*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"], \
        [*py, "serve", "--workers", "1"]


def _file_holds(db: Path) -> tuple[list[Any], list[Any]]:
    """``(verdicts, quarantined records)`` of the DuckDB file, read once every process has stopped."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return (con.execute("SELECT request_id, correct FROM feedback ORDER BY ts").fetchall(),
                con.execute("SELECT kind, request_id, reason FROM quarantine").fetchall())
    finally:
        con.close()


def test_a_second_verdict_after_a_restart_is_refused_and_the_store_keeps_the_first(tmp_path: Path) -> None:
    inst, port = free_port(), free_port()
    data = tmp_path / "data"
    fleet, serve = _commands(tmp_path, port, inst, {"duckdb_path": str(data / "traces.duckdb")})  # relay: 500 ms
    gateway = f"http://127.0.0.1:{port}"
    procs = [Proc(fleet)]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(first := Proc(serve))
        first.wait_for("gateway ready")
        judged, fresh = _chat(gateway), _chat(gateway)
        status, body = call("POST", f"{gateway}/v1/feedback", {"request_id": judged, "correct": True})
        assert status == 202, body
        # read back at once through the gateway (read-your-writes): it was empty until the next relay
        assert [(v["request_id"], v["correct"]) for v in _stored(gateway, judged)] == [(judged, True)]
        assert first.stop() == 0

        procs.append(again := Proc(serve))  # the same folder: its store holds the verdict, its claims are new
        again.wait_for("gateway ready")
        for _ in range(2):
            status, body = call("POST", f"{gateway}/v1/feedback", {"request_id": judged, "correct": False})
            assert status == 409, body  # was 202: accepted, learned, then quarantined by the store
            assert body["error"]["code"] == "feedback_exists" and body["error"]["param"] == "request_id"
        status, body = call("POST", f"{gateway}/v1/feedback", {"request_id": fresh, "correct": False})
        assert status == 202, body  # a request without a stored verdict still takes one
        # the fresh verdict went through the same spool after the refused one would have: once it is
        # stored, anything of the judged request's second verdict would be stored or quarantined too
        assert wait_until(lambda: _stored(gateway, fresh), 30), "the fresh verdict was never stored"
        assert [(v["request_id"], v["correct"]) for v in _stored(gateway, judged)] == [(judged, True)]
        assert again.stop() == 0  # (stops its store process: the file is read below, everything delivered)
    finally:
        for p in reversed(procs):
            p.stop()
    stored, quarantined = _file_holds(data / "traces.duckdb")
    assert stored == [(judged, True), (fresh, False)]  # one verdict each: the judged request's first
    assert quarantined == []
    assert not [p for p in data.glob("*quarantine*/*") if p.stat().st_size], "a record was quarantined"


def _feedback_written(gateway: str, prefix: str = "routelens_") -> float:
    """Verdicts the gateway has relayed (``routelens_``), or its store has written (``routelens_store_``)."""
    with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as resp:
        found = samples(resp.read().decode())
    return found.value(f"{prefix}records_written_total", kind="feedback", default=0.0)


def _crash(serve: Proc) -> None:
    """``kill -9`` of ``serve`` and of its store, which writes nothing more.

    The store is frozen first: its parent's death sends it SIGTERM, on which it would write what it
    holds before it ends.
    """
    store = store_pid(serve.proc.pid)
    assert store is not None
    os.kill(store, signal.SIGSTOP)
    os.killpg(serve.proc.pid, signal.SIGKILL)
    os.kill(store, signal.SIGKILL)
    serve.stop()
    assert wait_until(lambda: (fields := stat_fields(store)) is None or fields[0] == "Z", 10)


@pytest.mark.parametrize("waits_in", ["store", "gateway"])
def test_a_second_verdict_right_after_a_crash_is_refused_while_the_first_waits_to_be_written(
        tmp_path: Path, waits_in: str) -> None:
    inst, port = free_port(), free_port()
    data = tmp_path / "data"
    storage: dict[str, object] = {"duckdb_path": str(data / "traces.duckdb"),
                                  "store_flush_interval_ms": 600_000}  # the store writes when a read settles
    if waits_in == "gateway":
        storage["flush_interval_ms"] = 600_000  # and the gateway relays when a read settles
    fleet, serve = _commands(tmp_path, port, inst, storage)
    gateway = f"http://127.0.0.1:{port}"
    procs = [Proc(fleet)]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(first := Proc(serve))
        first.wait_for("gateway ready")
        judged, fresh = _chat(gateway), _chat(gateway)
        assert _stored(gateway, judged) == []  # a settled read: both traces relayed and written
        status, body = call("POST", f"{gateway}/v1/feedback", {"request_id": judged, "correct": True})
        assert status == 202, body
        if waits_in == "store":  # relayed: in the store's spool, written in 10 minutes
            assert wait_until(lambda: _feedback_written(gateway) == 1, 30)
        else:  # in the gateway's spool, relayed in 10 minutes
            assert _feedback_written(gateway) == 0
        assert _feedback_written(gateway, "routelens_store_") == 0
        _crash(first)

        procs.append(again := Proc(serve))  # both spools replayed; the store's next write is minutes away
        again.wait_for("gateway ready")
        for _ in range(2):
            status, body = call("POST", f"{gateway}/v1/feedback", {"request_id": judged, "correct": False})
            assert status == 409, body  # was 202: the first verdict was not written yet
            assert body["error"]["code"] == "feedback_exists"
        status, body = call("POST", f"{gateway}/v1/feedback", {"request_id": fresh, "correct": False})
        assert status == 202, body  # a request without a verdict still takes one
        assert _feedback_written(gateway, "routelens_store_") == 0  # all of it before the store wrote a verdict
        assert again.stop() == 0  # a clean stop: the gateway relays what it holds, the store writes it
    finally:
        for p in reversed(procs):
            p.stop()
    stored, quarantined = _file_holds(data / "traces.duckdb")
    assert stored == [(judged, True), (fresh, False)]  # one verdict each: the judged request's first
    assert quarantined == []
