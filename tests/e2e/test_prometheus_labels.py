"""A real Prometheus with the shipped scrape job and alert rules: on series shaped as the prober's, and on a gateway.

The audit's case: without ``honor_labels`` Prometheus renamed the series' own ``instance`` label
(the model instance) to ``exported_instance`` and put the scraped address in its place, so every
instance of a model became one alert: a crashed instance beside a drifting twin raised the
latency alert, which the rules exist to keep quiet. Only the target's address, the intervals and
the rule file's path are changed from ``deploy/prometheus.yml``; the scrape job is the shipped one.

The gateway's own alerts (deploy/prometheus/routelens-gateway.rules.yml) read series the gateway
exports about each instance: a real gateway over a simulated fleet, one instance's KV cache forced
to 80% (the sim's ``POST /admin/overrides``), must raise ``RouteLensKVCacheHigh`` for that
instance, by its own name, and not for its twin at 74%.

A gateway following a prober of its own (``probes.follow_url``) republishes its series, which the
shipped job reads from the gateway alone: an instance's syntax alert fires, by its own name, and
holds while the prober hangs (``kill -STOP``; its series had left the gateway's ``/metrics``, so
the alert resolved with the fault still there), the age the silent-prober rule reads growing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from app.run.procs import free_port
from probes.metrics import ProbeMetrics
from tests.e2e.conftest import Proc
from tests.e2e.net import call
from tests.polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None,
                                reason="prometheus missing: apt-get install -y prometheus")


def crashed_and_drifting() -> bytes:
    """Two instances of one model: v4-a gives no answer (every probe fails), v4-b answers but drifted."""
    reg = CollectorRegistry()
    m = ProbeMetrics(reg)
    for kind, failed in (("syntax", True), ("latency", True), ("semantic", True)):
        m.success.labels("v4-a", "v4", kind).set(0)
        m.verdict.labels("v4-a", "v4", kind, "failed").set(1 if failed else 0)
    for kind, failed in (("syntax", False), ("latency", False), ("semantic", True)):
        m.success.labels("v4-b", "v4", kind).set(0 if failed else 1)
        m.verdict.labels("v4-b", "v4", kind, "failed").set(1 if failed else 0)
    m.last_result.set(time.time())
    return generate_latest(reg)


@pytest.fixture
def exporter() -> Iterator[str]:
    body = crashed_and_drifting()

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def query(api: str, promql: str) -> list[dict[str, Any]]:
    url = f"{api}/api/v1/query?query={urllib.parse.quote(promql)}"
    with urllib.request.urlopen(url, timeout=5) as resp:
        result: list[dict[str, Any]] = json.loads(resp.read())["data"]["result"]
    return result


def start_prometheus(tmp_path: Path, target: str, interval: str = "1s") -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus on the shipped config and rules, its job's target ``target``; (process, API URL).

    Its scrapes every ``interval`` (their timeout too), its rules evaluated every second.
    """
    shipped = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    (job,) = shipped["scrape_configs"]
    job["static_configs"] = [{"targets": [target]}]
    config = {**shipped, "global": {"scrape_interval": interval, "evaluation_interval": "1s"},
              "rule_files": [str(ROOT / "deploy" / f) for f in shipped["rule_files"]]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"http://127.0.0.1:{port}"


def test_alerts_keep_each_instance_apart_under_the_shipped_scrape_job(tmp_path: Path, exporter: str) -> None:
    proc, api = start_prometheus(tmp_path, exporter)
    try:
        firing: set[tuple[str, str]] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(firing) < 2:
            time.sleep(0.5)
            try:
                alerts = query(api, 'ALERTS{alertstate="firing"}')
            except OSError:
                continue  # not listening yet
            firing = {(a["metric"]["alertname"], a["metric"]["instance"]) for a in alerts}
        time.sleep(2.5)  # two more evaluations: a wrongly grouped latency alert would fire by now
        firing = {(a["metric"]["alertname"], a["metric"]["instance"])
                  for a in query(api, 'ALERTS{alertstate="firing"}')}
        assert firing == {("RouteLensProbeSyntaxFailed", "v4-a"), ("RouteLensProbeSemanticDrift", "v4-b")}
        series = query(api, "routelens_probe_success")
        assert {s["metric"]["instance"] for s in series} == {"v4-a", "v4-b"}
        assert not any("exported_instance" in s["metric"] for s in series)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def alerts(api: str, name: str) -> list[dict[str, Any]]:
    """The alerts called ``name`` (pending or firing), as Prometheus' alerts API gives them; [] while not up."""
    try:
        with urllib.request.urlopen(f"{api}/api/v1/alerts", timeout=5) as resp:
            found: list[dict[str, Any]] = json.loads(resp.read())["data"]["alerts"]
    except OSError:
        return []  # not listening yet
    return [a for a in found if a["labels"]["alertname"] == name]


@pytest.mark.e2e
def test_a_gateway_instance_over_75_percent_kv_raises_its_own_alert(tmp_path: Path) -> None:
    port, hot, cool = free_port(), free_port(), free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")},
        "scrape": {"interval_s": 0.2, "stale_after_s": 30}, "probes": {"enabled": False},
        "fleet": {"instances": [{"id": "hot", "model": "m", "url": f"http://127.0.0.1:{hot}"},
                                {"id": "cool", "model": "m", "url": f"http://127.0.0.1:{cool}"}]},
    }))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(p), "--zero-delay"])
             for p in (hot, cool)]
    prometheus = None
    try:
        for p in procs:
            p.wait_for("fleet ready")
        # No load: the sim reports these whatever it serves. 80% is over the alert's 75%, under routing's 85%.
        for inst, kv in ((hot, 0.8), (cool, 0.74)):
            assert call("POST", f"http://127.0.0.1:{inst}/admin/overrides", {"kv_cache_usage": kv})[0] == 200
        procs.append(Proc([*py, "serve", "--config", str(cfg), "--workers", "1"]))
        procs[-1].wait_for("gateway ready")
        prometheus, api = start_prometheus(tmp_path, f"127.0.0.1:{port}")
        pending = wait_until(lambda: alerts(api, "RouteLensKVCacheHigh"), timeout_s=60)
        assert [a["labels"] for a in pending] == [{"alertname": "RouteLensKVCacheHigh", "severity": "warning",
                                                   "kind": "kv_cache", "instance": "hot", "model": "m"}]
        assert pending[0]["annotations"]["summary"].startswith(
            "hot (m): routelens_instance_kv_cache_usage_ratio is 80%, above the 75% threshold for 1m")
        assert pending[0]["annotations"]["runbook_url"] == "docs/on-call.md#routelenskvcachehigh"
        # held for the rule's `for` (1m): it fires, and still for the hot instance alone
        firing = wait_until(lambda: [a for a in alerts(api, "RouteLensKVCacheHigh") if a["state"] == "firing"],
                            timeout_s=120, every=1)
        assert [a["labels"]["instance"] for a in firing] == ["hot"]
        assert [a["labels"]["instance"] for a in alerts(api, "RouteLensKVCacheHigh")] == ["hot"]
        series = query(api, "routelens_instance_kv_cache_usage_ratio")
        assert {s["metric"]["instance"]: float(s["value"][1]) for s in series} == {"hot": 0.8, "cool": 0.74}
        assert not any("exported_instance" in s["metric"] for s in series)
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        for p in reversed(procs):
            p.stop()


@pytest.mark.e2e
def test_a_followed_prober_s_alerts_fire_through_the_gateway_and_hold_while_it_hangs(tmp_path: Path) -> None:
    port, prober_port = free_port(), free_port()
    urls = {f"s-{i}": f"http://127.0.0.1:{free_port()}" for i in range(2)}
    fleet = {"instances": [{"id": i, "model": "m", "url": u} for i, u in urls.items()]}
    prober_cfg, cfg = tmp_path / "prober.yaml", tmp_path / "routelens.yaml"
    prober_cfg.write_text(yaml.safe_dump({
        "fleet": fleet, "sim": {"time_scale": 50, "seed": 2}, "storage": {"duckdb_path": str(tmp_path / "p.duckdb")},
        "probes": {"interval_s": 0.5, "kinds": ["syntax"], "hysteresis": {"fail_k": 1, "fail_n": 1}}}))
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")}, "fleet": fleet,
        "scrape": {"interval_s": 0.5, "stale_after_s": 30},
        "probes": {"enabled": False, "follow_url": f"http://127.0.0.1:{prober_port}"}}))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "--config", str(prober_cfg), "sim", "fleet"])]
    prometheus = None
    try:
        procs[0].wait_for("fleet ready")
        assert call("POST", f"{urls['s-1']}/admin/faults", {"kind": "garbage", "rate": 1.0})[0] == 201
        procs.append(Proc([*py, "serve", "--config", str(cfg), "--workers", "1"]))  # binds before the prober
        procs[-1].wait_for("gateway ready")
        procs.append(Proc([*py, "--config", str(prober_cfg), "probes", "run", "--port", str(prober_port)]))
        procs[-1].wait_for("prober ready")
        # 2 s scrapes: the one that meets the prober's hang waits its second before the last answer's series
        prometheus, api = start_prometheus(tmp_path, f"127.0.0.1:{port}", interval="2s")

        def firing(name: str) -> list[dict[str, Any]]:
            return [a for a in alerts(api, name) if a["state"] == "firing"]

        [syntax] = wait_until(lambda: firing("RouteLensProbeSyntaxFailed"), timeout_s=30, every=0.5)
        assert syntax["labels"]["instance"] == "s-1"  # the model instance's own name, through the gateway
        series = query(api, "routelens_probe_verdict")
        assert {s["metric"]["instance"] for s in series} == set(urls)
        assert not any("exported_instance" in s["metric"] for s in series)

        os.kill(procs[-1].proc.pid, signal.SIGSTOP)  # the prober hangs: the gateway cannot read it
        try:
            time.sleep(10.0)  # five scrapes, ten evaluations: the alert had resolved within them
            assert [a["activeAt"] for a in firing("RouteLensProbeSyntaxFailed")] == [syntax["activeAt"]]
            # what RouteLensProberSilent{cause="stale"} reads (it fires past 120 s): the age of the last result
            [age] = query(api, "time() - max(routelens_probe_last_result_timestamp_seconds)")
            assert float(age["value"][1]) >= 8.0, age
            assert query(api, "absent(routelens_probe_last_result_timestamp_seconds)") == []
        finally:
            os.kill(procs[-1].proc.pid, signal.SIGCONT)
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        for p in reversed(procs):
            p.stop()
