"""``serve --workers 2`` with no Redis configured starts one: its workers share a rule's bucket; it ends with serve."""

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

import pytest
import yaml

from app.run.procs import descendant_running, free_port
from tests.e2e.conftest import Proc
from tests.polling import wait_until
from tests.promtext import samples
from tests.redis_server import REDIS_SERVER

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server not found (Debian package redis-server; make install)")]

BODY = {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}
RULES = """
routing_matrix:
  - rule_name: everyone
    condition: "input_length >= 0"
    primary_target: m
    throttle_config: {max_rps: 20, burst_window: 0.1s, overflow: reject}
"""


def redis_on(sock: Path) -> list[int]:
    """Pids of the redis-server processes serving ``sock``."""
    out = subprocess.run(["pgrep", "-f", f"redis-server unixsocket:{sock}"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def start(tmp_path: Path) -> tuple[Proc, Proc, str, Path]:
    port, inst = free_port(), free_port()
    (tmp_path / "rules.yaml").write_text(RULES)
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "data" / "traces.duckdb")},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "routing": {"policy": "rules.yaml"}, "probes": {"enabled": False},
    }))
    py = [sys.executable, "-m", "app"]
    fleet = Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])
    fleet.wait_for("fleet ready")
    gateway = Proc([*py, "--config", str(cfg), "serve", "--workers", "2"])
    try:
        gateway.wait_for("gateway ready http")
    except AssertionError:
        fleet.stop()  # the test's own try/finally is not reached
        raise
    return fleet, gateway, f"http://127.0.0.1:{port}", tmp_path / "data" / "redis.sock"


def post(url: str) -> tuple[int, str | None, float]:
    """One request on a new connection: status, the worker that answered, when."""
    status, worker, _ = post_id(url)
    return status, worker, time.monotonic()


def post_id(url: str) -> tuple[int, str | None, str | None]:
    """One chat request on a new connection: status, the worker that answered, the request id."""
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(BODY).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Connection": "close"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.headers.get("x-routelens-worker"), resp.headers.get("x-request-id")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("x-routelens-worker"), None


def test_two_workers_share_a_local_redis_and_one_rule_bucket(tmp_path: Path) -> None:
    fleet, gateway, url, sock = start(tmp_path)
    try:
        assert any(line.startswith(f"shared state: a local redis-server on unix://{sock}") for line in gateway.lines)
        assert len(redis_on(sock)) == 1
        # 1.2 s of requests from 8 connections at once: the rule's one bucket (20/s, 2 at once) is both workers'
        t0 = time.monotonic()
        got: list[tuple[int, str | None, float]] = []
        lock = threading.Lock()

        def client() -> None:
            while time.monotonic() - t0 < 1.2:
                answer = post(url)
                with lock:
                    got.append(answer)

        threads = [threading.Thread(target=client) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        admitted = [(w, at) for status, w, at in got if status == 200]
        refused = [status for status, _, _ in got if status != 200]
        assert set(refused) <= {429} and refused, got[:5]
        assert {w for w, _ in admitted} >= {"0", "1"} or {w for _, w, _ in got} >= {"0", "1"}
        # One bucket for both: 2 at once, then 20 a second (+2 for answers in flight at the ends); two buckets,
        # one per worker, would have admitted about twice that.
        elapsed = max(at for _, _, at in got) - t0
        assert len(admitted) <= 2 + 20 * elapsed + 2, (len(admitted), elapsed)
        assert len(admitted) >= 0.6 * 20 * elapsed  # and it did admit at its rate
    finally:
        gateway.stop()  # SIGTERM
        fleet.stop()
    assert wait_until(lambda: not redis_on(sock), 10), "redis-server outlived serve"


def test_the_local_redis_ends_when_serve_is_killed(tmp_path: Path) -> None:
    fleet, gateway, _, sock = start(tmp_path)
    try:
        assert len(redis_on(sock)) == 1
        os.kill(gateway.proc.pid, signal.SIGKILL)
        gateway.stop()
        assert wait_until(lambda: not redis_on(sock), 10), "redis-server outlived serve's kill -9"
    finally:
        for pid in redis_on(sock):
            os.kill(pid, signal.SIGKILL)
        subprocess.run(["pkill", "-f", f"--config {tmp_path}"], check=False)
        fleet.stop()


def send(url: str, method: str, path: str, body: object = None) -> tuple[int, str | None, object]:
    """One request on a new connection: status, the worker that answered, the JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json", "Connection": "close"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.headers.get("x-routelens-worker"), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("x-routelens-worker"), json.loads(exc.read())


def test_one_verdict_per_request_across_workers_and_the_same_learned_quality(tmp_path: Path) -> None:
    fleet, gateway, url, _ = start(tmp_path)
    try:
        rids = []
        for _ in range(6):  # under the rule's 20/s
            rids.append(send_id(url))
            time.sleep(0.15)
        assert all(rids), rids
        for rid in rids:
            verdict = {"request_id": rid, "correct": rid[-1] in "01234567"}
            first = wait_until(lambda v=verdict: (lambda r: r if r[0] == 202 else None)(
                send(url, "POST", "/v1/feedback", v)), 10)
            assert first, rid
            # again, on new connections until the other worker has answered too: always a 409
            answered = {first[1]}
            for _ in range(40):
                status, worker, _ = send(url, "POST", "/v1/feedback", verdict)
                assert status == 409, (rid, worker)
                answered.add(worker)
                if len(answered) == 2:
                    break
            assert answered == {"0", "1"}

        def quality_by_worker() -> dict[str | None, object]:
            seen: dict[str | None, object] = {}
            for _ in range(40):
                status, worker, state = send(url, "GET", "/v1/router/state")
                assert status == 200 and isinstance(state, dict)
                seen[worker] = state["quality"]
                if len(seen) == 2:
                    break
            return seen

        def agree() -> bool:
            seen = quality_by_worker()
            return len(seen) == 2 and seen["0"] == seen["1"] and bool(seen["0"])

        assert wait_until(agree, 10), quality_by_worker()
    finally:
        gateway.stop()
        fleet.stop()


def send_id(url: str) -> str | None:
    """A chat request's request id (what feedback names; None when it was refused)."""
    return post_id(url)[2]


def worker_pid(serve: int, number: int) -> int | None:
    """The pid of ``serve``'s worker ``number`` (the child whose command line has ``--worker NUMBER``)."""
    return descendant_running(serve, lambda argv: b"--worker" in argv
                              and argv[argv.index(b"--worker") + 1:][:1] == [str(number).encode()])


def shared_gauges(url: str) -> dict[str | None, tuple[float, float]]:
    """Each worker's ``(routelens_shared_healthy, routelens_shared_replicas)``: one scrape holds every worker's."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        scrape = samples(resp.read().decode())
    workers = {dict(labels)["worker"] for name, labels in scrape if name == "routelens_shared_healthy"}
    return {w: (scrape.value("routelens_shared_healthy", backend="redis", worker=w),
                scrape.value("routelens_shared_replicas", backend="redis", worker=w)) for w in sorted(workers)}


def test_a_worker_that_dies_is_started_again(tmp_path: Path) -> None:
    fleet, gateway, url, _ = start(tmp_path)
    try:
        first = worker_pid(gateway.proc.pid, 1)
        assert first is not None
        served_by_1: list[str] = []  # answered by worker 1 just before its death: some still in its spool
        for _ in range(40):
            status, worker, rid = post_id(url)
            if status == 200 and worker == "1" and rid:
                served_by_1.append(rid)
            if len(served_by_1) == 3:
                break
            time.sleep(0.06)  # under the rule's 20/s
        assert served_by_1
        os.kill(first, signal.SIGKILL)  # an OOM kill, say (what was queued on its socket is reset)
        assert wait_until(lambda: not Path(f"/proc/{first}").exists(), 10)  # reaped by serve
        answers = []
        for _ in range(10):  # worker 0 answers meanwhile (under the rule's 20/s)
            answers.append(post(url)[:2])
            time.sleep(0.1)
        assert all(status == 200 for status, _ in answers), answers
        assert wait_until(lambda: worker_pid(gateway.proc.pid, 1) not in (None, first), 30), "".join(gateway.lines)
        assert any("the gateway-1 process exited (code -9); starting it again" in line for line in gateway.lines)

        def both_answer() -> bool:
            workers = set()
            for _ in range(20):
                status, worker, _ = post(url)
                assert status in (200, 429)
                workers.add(worker)
                time.sleep(0.06)
            return workers == {"0", "1"}

        assert wait_until(both_answer, 30), "".join(gateway.lines[-20:])
        # nothing it served was lost: the new worker 1 replayed its spool into the store
        for rid in served_by_1:
            assert wait_until(lambda rid=rid: send(url, "GET", f"/v1/traces/{rid}")[0] == 200, 30), rid
        again = worker_pid(gateway.proc.pid, 1)
    finally:
        gateway.stop()
        fleet.stop()
    assert again is not None and wait_until(lambda: not Path(f"/proc/{again}").exists(), 10), "worker outlived serve"


def test_the_local_redis_is_started_again_and_the_workers_come_back_to_it(tmp_path: Path) -> None:
    fleet, gateway, url, sock = start(tmp_path)
    try:
        assert wait_until(lambda: shared_gauges(url) == {"0": (1.0, 2.0), "1": (1.0, 2.0)}, 20), shared_gauges(url)
        [first] = redis_on(sock)
        os.kill(first, signal.SIGKILL)
        assert wait_until(lambda: redis_on(sock) not in ([], [first]), 30), "".join(gateway.lines)
        assert any("the redis process exited (code -9); starting it again" in line for line in gateway.lines)
        # The new Redis starts empty: two replicas beating into it means both workers reconnected.
        assert wait_until(lambda: shared_gauges(url) == {"0": (1.0, 2.0), "1": (1.0, 2.0)}, 30), shared_gauges(url)
    finally:
        gateway.stop()
        fleet.stop()
    assert wait_until(lambda: not redis_on(sock), 10), "the new redis-server outlived serve"
