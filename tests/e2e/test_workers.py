"""``routelens serve --workers 2``: two gateway processes on one port, one store process, every trace found."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.e2e.net import call
from tests.polling import wait_until
from tests.promtext import samples

pytestmark = pytest.mark.e2e
BODY = {"model": "auto", "messages": [{"role": "user", "content": "classify: refund failed"}], "max_tokens": 8}


def post(url: str) -> tuple[str, str]:
    """One chat request on a new connection (SO_REUSEPORT spreads connections); (request id, worker)."""
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(BODY).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Connection": "close"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.status == 200
        return resp.headers["x-request-id"], resp.headers["x-routelens-worker"]


def test_two_workers_share_the_port_and_one_store(tmp_path: Path) -> None:
    port, inst = free_port(), free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb"), "flush_interval_ms": 20},
        "scrape": {"interval_s": 0.2, "stale_after_s": 30},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"interval_s": 0.5, "kinds": ["syntax"], "hysteresis": {"fail_k": 1, "fail_n": 1}},
    }))
    py = [sys.executable, "-m", "app"]
    fleet = Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])
    procs = [fleet]
    try:
        fleet.wait_for("fleet ready")
        gateway = Proc([*py, "serve", "--config", str(cfg), "--workers", "2"])
        procs.append(gateway)
        gateway.wait_for("gateway ready http")
        url = f"http://127.0.0.1:{port}"
        answers = [post(url) for _ in range(60)]
        workers = Counter(worker for _, worker in answers)
        assert set(workers) == {"0", "1"}, workers  # the kernel spread the connections over both processes
        for rid, _ in answers:  # through either worker: its own pending traces, then the one store (the other
            # worker's relay delivers within its flush interval; on a loaded machine, a moment later)
            assert wait_until(lambda rid=rid: call("GET", f"{url}/v1/traces/{rid}")[0] == 200, 10), rid
        ids = {rid for rid, _ in answers}

        def all_stored() -> bool:
            status, page = call("GET", f"{url}/v1/traces?limit=500")
            return status == 200 and ids <= {item["request_id"] for item in page["items"]}

        assert wait_until(all_stored, 30)

        def store_written_by_worker() -> dict[str, float]:  # the store's own series, republished by each worker
            seen: dict[str, float] = {}
            for _ in range(20):
                req = urllib.request.Request(f"{url}/metrics", headers={"Connection": "close"})
                with urllib.request.urlopen(req, timeout=10) as resp:
                    seen[resp.headers["x-routelens-worker"]] = samples(resp.read().decode()).value(
                        "routelens_store_records_written_total", default=-1.0, kind="trace")
                if len(seen) == 2:
                    break
            return seen

        written = store_written_by_worker()
        assert set(written) == {"0", "1"} and min(written.values()) >= len(ids), written

        # One prober per host (in the store process); every worker follows its verdicts.
        def syntax_verdicts() -> set[tuple[str, str]]:
            seen = set()
            for _ in range(12):
                req = urllib.request.Request(f"{url}/v1/router/state", headers={"Connection": "close"})
                with urllib.request.urlopen(req, timeout=10) as resp:
                    state = json.loads(resp.read())
                    verdicts = [p["verdict"] for p in state["instances"][0]["probes"] if p["kind"] == "syntax"]
                    seen |= {(resp.headers["x-routelens-worker"], v) for v in verdicts}
                    assert state["probes"]["source"].startswith("follow:http://127.0.0.1:")  # the store
            return seen

        assert wait_until(lambda: syntax_verdicts() == {("0", "ok"), ("1", "ok")}, 30)

        created: dict[str, set[int]] = {}  # /v1/models' created: serve's start, whichever worker answers
        for _ in range(40):
            req = urllib.request.Request(f"{url}/v1/models", headers={"Connection": "close"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                created.setdefault(resp.headers["x-routelens-worker"], set()).update(
                    card["created"] for card in json.loads(resp.read())["data"])
            if len(created) == 2:
                break
        assert set(created) == {"0", "1"} and len(created["0"] | created["1"]) == 1, created  # worker 1 starts first
    finally:
        for p in reversed(procs):
            p.stop()
