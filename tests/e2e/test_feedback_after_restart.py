"""Real processes: a second verdict on a request judged before ``serve`` restarted is a 409.

The gateway's claims (which request ids have a verdict) start again with it; the store keeps the
first verdict per request and quarantined a second one, which the restarted gateway used to
answer 202 (accepted, learned, then thrown away). ``serve --workers 1`` with its store process
over a DuckDB folder, a simulated instance, all on loopback. A verdict reads back through the
gateway as soon as it is posted (the gateway delivers what it holds before it asks the store).
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import duckdb
import pytest
import yaml

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.e2e.net import call
from tests.polling import wait_until

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


def test_a_second_verdict_after_a_restart_is_refused_and_the_store_keeps_the_first(tmp_path: Path) -> None:
    inst, port = free_port(), free_port()
    data = tmp_path / "data"
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port},
        "storage": {"duckdb_path": str(data / "traces.duckdb")},  # the default relay, every 500 ms
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"enabled": False},
    }))
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    serve = [*py, "serve", "--workers", "1"]
    gateway = f"http://127.0.0.1:{port}"
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])]
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
    con = duckdb.connect(str(data / "traces.duckdb"), read_only=True)
    try:
        stored = con.execute("SELECT request_id, correct FROM feedback ORDER BY ts").fetchall()
        quarantined = con.execute("SELECT kind, request_id, reason FROM quarantine").fetchall()
    finally:
        con.close()
    assert stored == [(judged, True), (fresh, False)]  # one verdict each: the judged request's first
    assert quarantined == []
    assert not [p for p in data.glob("*quarantine*/*") if p.stat().st_size], "a record was quarantined"
