"""``serve --workers 2``: the requests one worker has open reach the other worker's picker.

The instance is scraped once a minute here, so between scrapes the queue a decision reads is the
scraped one (0) plus the requests the gateway has sent since. Eight slow requests are held open on
eight connections (the kernel spreads them over both workers); then eight quick ones go at once.
Its trace's state for the instance must count all eight: with per-worker counts it saw only its own.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.redis_server import REDIS_SERVER

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")]
HELD = 8
SLOW = {"model": "auto", "messages": [{"role": "user", "content": "write a long story"}], "max_tokens": 600}
QUICK = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}


def _post(url: str, body: object, timeout_s: float = 60) -> tuple[int, dict[str, str]]:
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Connection": "close"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        resp.read()
        return resp.status, dict(resp.headers)


def _trace(url: str, request_id: str) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(f"{url}/v1/traces/{request_id}", timeout=5) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        exc.close()
        return None


def _stored(url: str, request_id: str, timeout_s: float = 10) -> dict[str, object]:
    """The trace, once stored (a worker finds its own before the store has them: ask until one answers)."""
    deadline = time.monotonic() + timeout_s
    while (trace := _trace(url, request_id)) is None:
        assert time.monotonic() < deadline, f"{request_id} was never stored"
        time.sleep(0.1)
    return trace


def test_each_worker_s_picker_counts_the_other_s_open_requests(tmp_path: Path) -> None:
    port, inst = free_port(), free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port, "upstream_timeout_s": 30},
        "storage": {"duckdb_path": str(tmp_path / "data" / "traces.duckdb")},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "scrape": {"interval_s": 60, "suspect_after_s": 120, "stale_after_s": 120},
        "constraints": [{"name": "queue", "metric": "queue", "op": "<=", "threshold": 1e9}],
        "probes": {"enabled": False},
        "resilience": {"breakers": {"instance": {"stall_after_s": 60}}},  # the held requests are slow, not stalled
    }))
    py = [sys.executable, "-m", "app"]
    fleet = Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--time-scale", "0.25"])
    try:
        fleet.wait_for("fleet ready")
        gateway = Proc([*py, "--config", str(cfg), "serve", "--workers", "2"])
        try:
            gateway.wait_for("gateway ready http")
            url = f"http://127.0.0.1:{port}"
            held = [threading.Thread(target=_post, args=(url, SLOW), daemon=True) for _ in range(HELD)]
            for t in held:
                t.start()
            time.sleep(1.0)  # all sent, none answered (600 tokens take about 7 s here); the counts published
            with ThreadPoolExecutor(8) as pool:  # at once, on new connections: both workers answer some
                quick = list(pool.map(lambda _: _post(url, QUICK), range(8)))
            seen: dict[str, list[int]] = {}
            for _, headers in quick:
                rid = headers["x-request-id"]
                trace = _stored(url, rid)
                (cand,) = trace["candidates"]  # type: ignore[index]
                seen.setdefault(headers.get("x-routelens-worker", "?"), []).append(int(cand["state"]["queue"]))
            assert len(seen) == 2, seen
            assert all(q >= HELD for qs in seen.values() for q in qs), seen  # every held request, not about half
            for t in held:
                t.join(60)
        finally:
            gateway.stop()
    finally:
        fleet.stop()
