"""``serve --workers 2``: whichever worker answers a scrape of the shared port, it shows the whole gateway.

Each worker used to answer ``/metrics`` with its own series only, unlabelled, so Prometheus saw a
counter jump between the two workers' values (false resets) and half the traffic. Now every
scrape holds both workers' series, labelled ``worker``, one HELP/TYPE per family, the store's and
the prober's republished series once; a worker that does not answer is left out after a second.
A prober of its own (``probes.follow_url``) is republished the same way: it had not been at all.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import yaml

from app.run.procs import descendant_running, free_port
from tests.e2e.conftest import Proc
from tests.polling import wait_until
from tests.promtext import Samples, samples
from tests.redis_server import requires_redis

pytestmark = [pytest.mark.e2e, requires_redis]  # two workers share their state through a local Redis
BODY = {"model": "auto", "messages": [{"role": "user", "content": "classify: refund failed"}], "max_tokens": 8}
UP = "routelens_metrics_worker_up"


def post(url: str) -> str:
    """One chat request on a new connection (SO_REUSEPORT spreads connections); the worker that answered."""
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(BODY).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Connection": "close"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.status == 200
        return str(resp.headers["x-routelens-worker"])


def scrape(url: str, timeout: float = 10) -> tuple[str, str, float]:
    """One ``/metrics`` on a new connection: (the worker that answered, the text, seconds it took)."""
    start = time.monotonic()
    req = urllib.request.Request(f"{url}/metrics", headers={"Connection": "close"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return str(resp.headers["x-routelens-worker"]), resp.read().decode(), time.monotonic() - start


def requests_by_worker(m: Samples) -> dict[str, float]:
    """``routelens_gateway_requests_total`` summed per ``worker`` label ("" for a series without one)."""
    out: dict[str, float] = {}
    for (name, labels), v in m.items():
        if name == "routelens_gateway_requests_total":
            worker = dict(labels).get("worker", "")
            out[worker] = out.get(worker, 0.0) + v
    return out


def check_valid(text: str) -> Samples:
    """Parse (a series twice is an error), one TYPE per family, and ``promtool check metrics`` when installed."""
    m = samples(text)
    types = re.findall(r"^# TYPE (\S+)", text, re.M)
    assert [t for t, n in Counter(types).items() if n > 1] == []
    if (promtool := shutil.which("promtool")) is not None:
        out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
    return m


def test_every_scrape_shows_both_workers_labelled_and_counters_never_go_back(tmp_path: Path) -> None:
    port, inst = free_port(), free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb"), "flush_interval_ms": 20},
        "scrape": {"interval_s": 0.2, "stale_after_s": 30},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"interval_s": 0.5, "kinds": ["syntax"], "hysteresis": {"fail_k": 1, "fail_n": 1}},
    }))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])]
    try:
        procs[0].wait_for("fleet ready")
        gateway = Proc([*py, "serve", "--config", str(cfg), "--workers", "2"])
        procs.append(gateway)
        gateway.wait_for("gateway ready http")
        url = f"http://127.0.0.1:{port}"
        served: Counter[str] = Counter()
        seen: dict[str, float] = {}
        answered: set[str] = set()
        for n in range(40):  # until both workers have answered scrapes, at least 8 scrapes
            served.update(post(url) for _ in range(4))
            worker, text, _ = scrape(url)
            answered.add(worker)
            m = check_valid(text)
            now = requests_by_worker(m)
            # none unlabelled (a worker that has served nothing yet has no request series: the kernel picks;
            # each worker's count is checked against what it served below, once its answers are finished)
            assert set(now) <= {"0", "1"}, (worker, now)
            assert all(now[w] >= seen.get(w, 0.0) for w in now), (worker, seen, now)  # no false reset
            seen = now
            assert m.value(UP, worker="0") == 1 and m.value(UP, worker="1") == 1, worker
            own = [(name, dict(labels)) for name, labels in m
                   if name.startswith(("routelens_gateway_", "routelens_traces_"))]
            assert own and all("worker" in labels for _, labels in own), worker
            assert {labels["worker"] for _, labels in own} == {"0", "1"}, worker  # both workers' series
            # the store's and the prober's series: once each, unlabelled (not once per worker)
            republished = [(name, dict(labels)) for name, labels in m
                           if name.startswith(("routelens_store_", "routelens_probe_"))]
            assert republished and all("worker" not in labels for _, labels in republished), worker
            assert m.value("routelens_store_traces_pending") >= 0, worker
            if n >= 7 and answered == {"0", "1"}:
                break
        assert answered == {"0", "1"}, answered
        assert set(served) == {"0", "1"}, served

        def counted() -> dict[str, float]:
            return requests_by_worker(samples(scrape(url)[1]))

        # each worker's counter is what it served (a request is counted once its answer is finished)
        assert wait_until(lambda: counted() == {w: float(c) for w, c in served.items()}, 10), (counted(), served)

        def probe_series() -> list[dict[str, str]]:
            return [dict(labels) for name, labels in samples(scrape(url)[1]) if name.startswith("routelens_probe_")]

        assert wait_until(lambda: probe_series() != [], 20)  # the prober's first results
        assert not [labels for labels in probe_series() if "worker" in labels]  # once, unlabelled

        # a worker that does not answer (stopped) is left out after a second, and said to be missing
        stopped = descendant_running(gateway.proc.pid, lambda argv: b"--worker" in argv
                                     and argv[argv.index(b"--worker") + 1:][:1] == [b"1"])
        assert stopped is not None
        os.kill(stopped, signal.SIGSTOP)
        try:
            for _ in range(30):  # the kernel hands some connections to the stopped worker: those time out
                try:
                    worker, text, took = scrape(url, timeout=6)
                except OSError:
                    continue
                if worker == "0":
                    break
            assert worker == "0"
            assert took < 4.0, took  # its 1 s timeout, not the stopped worker (the client gives up at 6 s)
            m = check_valid(text)
            assert m.value(UP, worker="0") == 1 and m.value(UP, worker="1") == 0
            assert set(requests_by_worker(m)) == {"0"}
            assert not [name for name, labels in m if ("worker", "1") in labels and name != UP]
        finally:
            os.kill(stopped, signal.SIGCONT)
    finally:
        for p in reversed(procs):
            p.stop()


def test_a_prober_of_its_own_is_republished_once_whichever_worker_answers(tmp_path: Path) -> None:
    port, inst, prober_port = free_port(), free_port(), free_port()
    fleet = {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]}
    prober_cfg, cfg = tmp_path / "prober.yaml", tmp_path / "routelens.yaml"
    prober_cfg.write_text(yaml.safe_dump({
        "fleet": fleet, "storage": {"duckdb_path": str(tmp_path / "probes.duckdb")},
        "probes": {"interval_s": 0.5, "kinds": ["syntax"], "hysteresis": {"fail_k": 1, "fail_n": 1}}}))
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")},
        "scrape": {"interval_s": 0.2, "stale_after_s": 30}, "fleet": fleet,
        "probes": {"enabled": False, "follow_url": f"http://127.0.0.1:{prober_port}"}}))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(Proc([*py, "serve", "--config", str(cfg), "--workers", "2"]))  # binds before the prober
        procs[-1].wait_for("gateway ready http")
        procs.append(Proc([*py, "--config", str(prober_cfg), "probes", "run", "--port", str(prober_port)]))
        procs[-1].wait_for("prober ready")
        url, prober = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{prober_port}"

        def verdicts(text: str) -> set[frozenset[tuple[str, str]]]:
            return {labels for name, labels in check_valid(text) if name == "routelens_probe_verdict"}

        def prober_own() -> set[frozenset[tuple[str, str]]]:
            with urllib.request.urlopen(f"{prober}/metrics", timeout=10) as resp:
                return verdicts(resp.read().decode())

        own = wait_until(prober_own, 20)  # its first results
        assert {dict(labels)["kind"] for labels in own} == {"syntax"}
        answered: set[str] = set()
        for _ in range(40):  # until both workers have answered a scrape with the prober's series
            worker, text, _ = scrape(url)
            found = verdicts(text)  # a series twice (once per worker) fails to parse
            if found:
                assert found == own, (worker, found, own)  # once, unlabelled (none had been there)
                answered.add(worker)
            if answered == {"0", "1"}:
                break
            time.sleep(0.2)
        assert answered == {"0", "1"}, answered
    finally:
        for p in reversed(procs):
            p.stop()
