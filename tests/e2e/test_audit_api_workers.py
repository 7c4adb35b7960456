"""``serve --workers 2``: feedback and a lookup right after the answer find the trace, whichever worker they reach.

Each worker answered a lookup from its own pending traces (not yet relayed to the store) and the
store only, so a lookup the kernel handed to the other worker before the relay (up to
``storage.flush_interval_ms``) was a 404 ``trace_not_found``: about half of them. Now a worker
that misses asks its siblings on their private loopback ports.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.redis_server import requires_redis

pytestmark = [pytest.mark.e2e, requires_redis]  # two workers share their state through a local Redis
BODY = {"model": "auto", "messages": [{"role": "user", "content": "classify: refund failed"}], "max_tokens": 8}


def call(url: str, data: dict[str, Any] | None = None) -> tuple[int, Message, dict[str, Any], float]:
    """One request on a new connection (SO_REUSEPORT spreads connections): status, headers, body, seconds."""
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                 method="GET" if data is None else "POST",
                                 headers={"Content-Type": "application/json", "Connection": "close"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            status, headers, body = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        status, headers, body = exc.code, exc.headers, exc.read()
    return status, headers, json.loads(body), time.perf_counter() - start


def test_lookups_and_feedback_right_after_the_answer_never_miss_across_workers(tmp_path: Path) -> None:
    port, inst = free_port(), free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port},
        # a trace waits up to a second in its worker before the relay: every lookup below comes before it
        "storage": {"duckdb_path": str(tmp_path / "traces.duckdb"), "flush_interval_ms": 1000},
        "scrape": {"interval_s": 0.2, "stale_after_s": 30}, "probes": {"enabled": False},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
    }))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(Proc([*py, "serve", "--config", str(cfg), "--workers", "2"]))
        procs[1].wait_for("gateway ready http")
        url = f"http://127.0.0.1:{port}"
        lookups: list[tuple[int, bool, float]] = []  # (status, answered by another worker, seconds)
        verdicts: list[tuple[int, bool]] = []
        for _ in range(300):
            status, headers, body, _ = call(f"{url}/v1/chat/completions", BODY)
            assert status == 200, body
            rid, served_by = headers["x-request-id"], headers["x-routelens-worker"]
            status, headers, found, took = call(f"{url}/v1/traces/{rid}")
            worker = headers["x-routelens-worker"]
            lookups.append((status, worker != served_by, took))
            assert status == 200 and found["request_id"] == rid, (status, found, served_by, worker)
            status, headers, answer, _ = call(f"{url}/v1/feedback", {"request_id": rid, "correct": True})
            worker = headers["x-routelens-worker"]
            verdicts.append((status, worker != served_by))
            assert status == 202, (status, answer, served_by, worker)
            if sum(o for _, o, _ in lookups) >= 15 and sum(o for _, o in verdicts) >= 15:
                break
        # enough of each reached the other worker (the kernel spreads new connections over both)
        assert sum(o for _, o, _ in lookups) >= 15 and sum(o for _, o in verdicts) >= 15, (lookups, verdicts)
        own = [t for _, o, t in lookups if not o]
        other = [t for _, o, t in lookups if o]
        misses = [call(f"{url}/v1/traces/req_unknown{i:04d}")[3] for i in range(40)]  # here, store, siblings, store
        print(f"lookup ms, median: own worker {1e3 * statistics.median(own):.2f}, "
              f"other worker {1e3 * statistics.median(other):.2f}, unknown id {1e3 * statistics.median(misses):.2f}")
    finally:
        for p in reversed(procs):
            p.stop()

