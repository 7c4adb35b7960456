"""A real Prometheus scraping series shaped as the prober's, with the shipped scrape job and alert rules.

The audit's case: without ``honor_labels`` Prometheus renamed the series' own ``instance`` label
(the model instance) to ``exported_instance`` and put the scraped address in its place, so every
instance of a model became one alert: a crashed instance beside a drifting twin raised the
latency alert, which the rules exist to keep quiet. Only the target's address, the intervals and
the rule file's path are changed from ``deploy/prometheus.yml``; the scrape job is the shipped one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
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


def test_alerts_keep_each_instance_apart_under_the_shipped_scrape_job(tmp_path: Path, exporter: str) -> None:
    shipped = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    (job,) = shipped["scrape_configs"]
    job["static_configs"] = [{"targets": [exporter]}]
    config = {**shipped, "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [str(ROOT / "deploy" / f) for f in shipped["rule_files"]]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
