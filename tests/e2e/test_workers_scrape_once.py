"""``serve --workers 2`` scrapes each instance once a round: worker 0 scrapes, worker 1 follows its rounds.

Each worker used to scrape every instance: twice the scrapes per instance and twice the CPU of
parsing them (0.2 s of a core a round per worker at 200 instances). Worker 1 now holds the same
state from worker 0's rounds, and scrapes for itself while worker 0 stops sending them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.polling import wait_until
from tests.redis_server import requires_redis

pytestmark = [pytest.mark.e2e, requires_redis]  # two workers share their state through a local Redis
INTERVAL_S = 0.2


class Instance:
    """A loopback ``/metrics`` that counts its scrapes and serves a queue length the test sets."""

    def __init__(self) -> None:
        self.hits = 0
        self.queue = 3
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                with lock:
                    outer.hits += 1
                body = (f'vllm:num_requests_waiting{{model_name="m"}} {outer.queue}\n'
                        'vllm:num_requests_running{model_name="m"} 0\n'
                        'vllm:kv_cache_usage_perc{model_name="m"} 0.1\n').encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def rate(self, seconds: float) -> float:
        """Scrapes a second over the next ``seconds``."""
        start = self.hits
        time.sleep(seconds)
        return (self.hits - start) / seconds


def state_of(url: str) -> tuple[str, dict]:  # type: ignore[type-arg]
    """``GET /v1/router/state`` on a new connection: (the worker that answered, its body)."""
    req = urllib.request.Request(f"{url}/v1/router/state", headers={"Connection": "close"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.headers["x-routelens-worker"]), json.loads(resp.read())


def queue_by_worker(url: str) -> dict[str, tuple[float, str]]:
    """Each worker's view of the instance's queue and where its scrapes come from (until both answered)."""
    seen: dict[str, tuple[float, str]] = {}
    for _ in range(60):
        worker, body = state_of(url)
        inst = next(s for s in body["instances"] if s["instance"] == "a")
        seen[worker] = (inst["queue"], body["scrape"]["source"])
        if len(seen) == 2:
            break
    return seen


def test_worker_1_follows_worker_0s_rounds_and_scrapes_for_itself_while_they_stop(tmp_path: Path) -> None:
    inst, port = Instance(), free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")},
        "scrape": {"interval_s": INTERVAL_S, "stale_after_s": 30},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst.port}"}]},
        "probes": {"enabled": False},
    }))
    gateway = Proc([sys.executable, "-m", "app", "serve", "--config", str(cfg), "--workers", "2"])
    try:
        gateway.wait_for("gateway ready http")
        url = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: queue_by_worker(url) == {"0": (3.0, "own"), "1": (3.0, "followed")}, 20), \
            queue_by_worker(url)
        once = 1 / INTERVAL_S
        assert 0.5 * once <= inst.rate(3.0) <= 1.4 * once  # one scraper: 5 a second, not 10
        inst.queue = 7  # both workers see the change
        assert wait_until(lambda: queue_by_worker(url) == {"0": (7.0, "own"), "1": (7.0, "followed")}, 20), \
            queue_by_worker(url)

        os.kill(gateway.proc.pid, signal.SIGSTOP)  # worker 0 (serve itself) sends no round
        try:
            time.sleep(1.0)  # FOLLOW_FOR intervals, and a little
            assert inst.rate(2.0) >= 0.5 * once  # worker 1 scrapes for itself meanwhile
        finally:
            os.kill(gateway.proc.pid, signal.SIGCONT)
        assert wait_until(lambda: queue_by_worker(url).get("1", (0, ""))[1] == "followed", 20)
        time.sleep(1.0)
        assert inst.rate(3.0) <= 1.4 * once  # and follows again
        logged = "".join(gateway.lines)
        assert "scrapes for itself again" in logged and "scrape rounds again" in logged, logged
        # worker 0 ends the streams it serves before its private endpoint stops (which waited 60 s for them)
        assert gateway.stop() == 0, "".join(gateway.lines)
    finally:
        gateway.stop()
        inst.server.shutdown()
        inst.server.server_close()
