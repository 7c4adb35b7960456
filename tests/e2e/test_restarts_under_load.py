"""The store process and the shared Redis killed (``kill -9``) and restarted while traffic flows.

Requests never wait on either: every one is answered. The store's traces wait in the gateway's
spool while it is gone and are all stored once it is back (one per answered request); the workers
fall back to their own state while Redis is gone, and every one shares again once it is back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import duckdb
import pytest
import yaml

from app.run.local_redis import redis_argv
from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.polling import wait_until
from tests.promtext import samples
from tests.redis_server import REDIS_SERVER

pytestmark = pytest.mark.e2e
BODY = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "hello there"}]}).encode()


def _post(url: str) -> int:
    req = urllib.request.Request(url, data=BODY, headers={"Content-Type": "application/json", "Connection": "close"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code
    except OSError:  # the gateway is gone (a failed test's teardown): counted, never raised on the thread
        return 0


class Load:
    """Requests one after another on a thread (each on a new connection) until stopped."""

    def __init__(self, url: str) -> None:
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url,), daemon=True)
        self._thread.start()

    def _run(self, url: str) -> None:
        while not self._stop.is_set():
            self.statuses.append(_post(url))
            time.sleep(0.01)

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(60)
        return self.statuses


def _pending(gateway: str) -> float:
    with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("routelens_traces_pending "))


def _healthy_workers(gateway: str) -> set[str]:
    """The workers whose shared state is healthy, says a /metrics (any worker answers for every worker)."""
    with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {dict(labels)["worker"] for (name, labels), v in samples(text).items()
            if name == "routelens_shared_healthy" and ("backend", "redis") in labels and v == 1.0}


def _config(tmp: Path, inst: int, port: int) -> Path:
    cfg = tmp / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port},
        "storage": {"duckdb_path": str(tmp / "data" / "traces.duckdb"), "flush_interval_ms": 100},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"enabled": False},
    }))
    return cfg


def test_the_store_killed_and_restarted_under_load_loses_no_trace(tmp_path: Path) -> None:
    inst, port, store_port = free_port(), free_port(), free_port()
    cfg = _config(tmp_path, inst, port)
    db = tmp_path / "store.duckdb"
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    store_cmd = [*py, "store", "--port", str(store_port), "--db", str(db)]
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])]
    try:
        procs[0].wait_for("fleet ready")
        store = Proc(store_cmd)
        procs.append(store)
        store.wait_for("store ready")
        gateway = Proc([*py, "serve", "--workers", "1", "--store-url", f"http://127.0.0.1:{store_port}"])
        procs.append(gateway)
        gateway.wait_for("gateway ready")
        url = f"http://127.0.0.1:{port}"
        load = Load(f"{url}/v1/chat/completions")
        time.sleep(1.5)
        os.kill(store.proc.pid, signal.SIGKILL)  # the store dies mid-write
        store.proc.wait(10)
        time.sleep(1.5)  # requests go on; their traces wait in the gateway's spool
        assert _pending(url) > 0
        store = Proc(store_cmd)
        procs.append(store)
        store.wait_for("store ready")
        time.sleep(1.0)
        statuses = load.stop()
        assert wait_until(lambda: _pending(url) == 0, 30), _pending(url)
        gateway.stop()
        store.stop()
    finally:
        for p in reversed(procs):
            p.stop()
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
    con = duckdb.connect(str(db), read_only=True)
    try:
        ((stored, distinct),) = con.execute("SELECT count(*), count(DISTINCT request_id) FROM traces").fetchall()
    finally:
        con.close()
    assert stored == distinct == len(statuses)


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_redis_killed_and_restarted_under_load_stalls_no_request(tmp_path: Path) -> None:
    inst, port = free_port(), free_port()
    cfg = _config(tmp_path, inst, port)
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])]
    sock = tmp_path / "data" / "redis.sock"
    try:
        procs[0].wait_for("fleet ready")
        gateway = Proc([*py, "serve", "--workers", "2"])  # serve starts its own redis-server on the socket
        procs.append(gateway)
        gateway.wait_for("gateway ready http")
        found = subprocess.run(["pgrep", "-f", f"redis-server unixsocket:{sock}"], capture_output=True, text=True)
        (redis_pid,) = [int(p) for p in found.stdout.split()]
        url = f"http://127.0.0.1:{port}"
        load = Load(f"{url}/v1/chat/completions")
        time.sleep(1.0)
        os.kill(redis_pid, signal.SIGKILL)
        time.sleep(2.0)  # the workers run on their own state meanwhile
        during = len(load.statuses)
        sock.unlink(missing_ok=True)  # what kill -9 left behind
        assert REDIS_SERVER is not None
        redis = subprocess.Popen(redis_argv(REDIS_SERVER, sock.parent), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            # both workers (each answers on its own connections) reconnect: shared again
            assert wait_until(lambda: _healthy_workers(url) == {"0", "1"}, 20), _healthy_workers(url)
            statuses = load.stop()
        finally:
            redis.terminate()
            redis.wait(10)
    finally:
        for p in reversed(procs):
            p.stop()
    assert during > 0 and len(statuses) > during  # answered while Redis was gone, and after it came back
    assert set(statuses) == {200}, sorted(set(statuses))
    assert not any("Traceback" in line for line in gateway.lines), "".join(gateway.lines)[-3000:]
