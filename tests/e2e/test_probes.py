"""The probes end to end: a drifting instance is found, taken out, alerted on, and let back in.

Real processes: a simulated fleet of four instances of one model, ``routelens serve`` probing it
with a shortened period, and a webhook receiver (an HTTP server in this test) taking the
Alertmanager-format notifications. Counts, never timings: the drift must be caught within two
semantic probe rounds of the instance (the hysteresis is 2 of 3), whatever the clock says.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from openai import OpenAI

from app.run.procs import free_port
from tests.e2e.conftest import Proc
from tests.e2e.net import call, metrics
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
BAD = "m-2"
PERIOD_S = 3.0


class Receiver:
    """An Alertmanager webhook receiver: records every notification body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.bodies.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, status: str) -> list[dict[str, Any]]:
        return [a for b in self.bodies for a in b["alerts"] if a["status"] == status
                and a["labels"]["alertname"] == "RouteLensProbeSemanticDrift"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Receiver]]:
    tmp = tmp_path_factory.mktemp("probes")
    receiver = Receiver()
    urls = {f"m-{i}": f"http://127.0.0.1:{free_port()}" for i in range(4)}
    port = free_port()
    cfg = tmp / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 20},
        "scrape": {"interval_s": 0.2, "timeout_s": 0.5, "stale_after_s": 30},
        "sim": {"time_scale": 50, "seed": 5},
        "fleet": {"instances": [{"id": i, "model": "chat-m", "url": u} for i, u in urls.items()]},
        "probes": {"interval_s": PERIOD_S, "timeout_s": 20, "kinds": ["syntax", "semantic"],
                   "hysteresis": {"fail_k": 2, "fail_n": 3, "recover_m": 3},
                   "alerts": {"evaluate_every_s": 0.2, "webhooks": [{"url": receiver.url, "backoff_s": 0.1}]}},
    }))
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    procs = [Proc([*py, "sim", "fleet"])]
    try:
        procs[0].wait_for("fleet ready")
        procs.append(Proc([*py, "serve", "--workers", "1"]))
        procs[1].wait_for("gateway ready")
        yield f"http://127.0.0.1:{port}", urls, receiver
    finally:
        for p in reversed(procs):
            p.stop()
        receiver.server.shutdown()
        receiver.server.server_close()


def verdict(gateway: str, instance: str, kind: str) -> str | None:
    _, state = call("GET", f"{gateway}/v1/router/state")
    snap = next(s for s in state["instances"] if s["instance"] == instance)
    return next((p["verdict"] for p in snap["probes"] if p["kind"] == kind), None)


def semantic_results(gateway: str, instance: str, since: datetime) -> list[dict[str, Any]]:
    end = datetime.now(UTC) + timedelta(minutes=1)
    q = f"start={quote(since.isoformat())}&end={quote(end.isoformat())}&instance={instance}&kind=semantic&limit=1000"
    status, body = call("GET", f"{gateway}/v1/probes?{q}")
    assert status == 200, body
    return list(body["results"])


def test_a_drifting_instance_is_taken_out_alerted_on_and_let_back_in(
        stack: tuple[str, dict[str, str], Receiver]) -> None:
    gateway, urls, receiver = stack
    # Every instance earns an ok semantic verdict first (the embedding model loads on the first round).
    assert wait_until(lambda: all(verdict(gateway, i, "semantic") == "ok" for i in urls), 120, 0.5)
    since = datetime.now(UTC)
    assert call("POST", f"{urls[BAD]}/admin/faults", {"kind": "drift", "rate": 1.0})[0] == 201

    assert wait_until(lambda: verdict(gateway, BAD, "semantic") == "failed", 60, 0.2)
    after_fault = wait_until(lambda: semantic_results(gateway, BAD, since), 10)  # stored a moment later
    failing = [r for r in after_fault if r["verdict"] == "failed"]
    assert failing and all(r["value"] < r["threshold"] for r in failing), [
        (r["value"], r["threshold"], r["error_class"], r["reason"]) for r in failing]
    # k=2 of n=3: the verdict turned on the second failing round at the latest (plus one round in flight).
    assert len(after_fault) <= 3, [(r["ts"], r["verdict"]) for r in after_fault]
    # The prober serve started publishes through the gateway's own /metrics.
    scraped = metrics(gateway)
    assert scraped.value("routelens_probe_verdict", instance=BAD, model="chat-m", kind="semantic",
                         verdict="failed") == 1
    assert scraped.value("routelens_probe_success", instance="m-0", model="chat-m", kind="semantic") == 1
    assert wait_until(lambda: "RouteLensProbeSemanticDrift" in {
        a["name"] for a in call("GET", f"{gateway}/v1/alerts")[1]["alerts"] if a["instance"] == BAD}, 10)

    client = OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0)
    served: list[str] = []
    for n in range(20):
        raw = client.chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": f"hello number {n}"}], max_tokens=8)
        served.append(raw.headers["x-routelens-instance"])
        if n == 0:
            status, trace = call("GET", f"{gateway}/v1/traces/{raw.headers['x-request-id']}")
            assert status == 200
            bad = next(c for c in trace["candidates"] if c["instance"] == BAD)
            (violation,) = [v for v in bad["violations"] if v["constraint"] == "probe"]
            assert not bad["feasible"] and violation["metric"] == "probe_semantic"
            assert violation["value"] < violation["threshold"], violation
            assert "semantic probe failed" in violation["reason"], violation
    assert BAD not in served and len(set(served)) >= 2

    assert wait_until(lambda: receiver.alerts("firing"), 30)
    (fired,) = receiver.alerts("firing")  # deduplicated: one notification for the one alert
    assert fired["labels"]["instance"] == BAD and fired["labels"]["severity"] == "critical"

    assert call("DELETE", f"{urls[BAD]}/admin/faults")[0] == 200
    assert wait_until(lambda: verdict(gateway, BAD, "semantic") == "ok", 90, 0.3)  # after m=3 passes
    assert wait_until(lambda: receiver.alerts("resolved"), 30)

    def told() -> list[list[str]]:  # router events reach the store through the spool, a flush later
        _, events = call("GET", f"{gateway}/v1/events?start={quote(since.isoformat())}"
                                f"&end={quote((datetime.now(UTC) + timedelta(minutes=1)).isoformat())}&kind=alert")
        return [e["message"].split()[:2] for e in events["events"] if e["instance"] == BAD]

    wait_until(lambda: len(told()) >= 2, 15)
    assert told() == [["firing:", "RouteLensProbeSemanticDrift"], ["resolved:", "RouteLensProbeSemanticDrift"]]
