"""``python -m bench gateway --otel``: the gateway's CPU per request with OpenTelemetry export on and off.

Two RouteLens gateways (1 worker each) run at once in front of the same zero-delay simulated
instance: ``otel_off`` and ``otel_on`` (``otel: {enabled: true, sample_ratio: 1.0}``, every
request exported). Their c=1 and c=16 wrk slices are interleaved round by round as in
:mod:`bench.gateway` (the machine's speed changes from minute to minute; both sides see the same
minutes), and each side's ``cpu_us_per_request`` is the CPU of the gateway's whole process tree
over its runs per answered request: the exporter's thread (span building, protobuf encoding,
the HTTP request) included, the receiver not. The receiver is a loopback OTLP/HTTP endpoint in
this process that reads each request and answers 200 without decoding it (what a collector's
cost is, is not ours); ``spans`` is what the gateway says it exported and dropped.

The difference of two gateways' CPU moves by more than 10% from run to run on a busy machine, so
``export_thread`` also gives the CPU of the exporter's own thread (``trace-export-otel``: the
parsing, span building, encoding and the HTTP request, read from ``/proc``) per request of the
``otel_on`` gateway, and ``share_pct``: that against ``otel_off``'s CPU per request at c=1 and c=16.

Last line: ``{"otel_off": {"c1": {...}, "c16": {...}}, "otel_on": {...}, "cpu_rise_pct": {"c1": x, "c16": y},
"spans": {"exported": n, "dropped": m}, "receiver": {"requests": r, "bytes": b},
"export_thread": {"cpu_us_per_request": e, "share_pct": {"c1": p, "c16": q}}}``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from app.run.procs import Child, free_port
from bench import wrk
from bench.drain import drained, metric_total, store_url_of
from bench.stage_budget import thread_cpu
from bench.wrk import body_script

__all__ = ["OtlpReceiver", "run_otel"]

# the gateway benchmark's request (bench.gateway.BODY), which this module does not import: bench.gateway runs it
BODY = {"model": "auto", "messages": [{"role": "user", "content": "classify: 紧急 refund failed"}], "max_tokens": 16}


class OtlpReceiver:
    """A loopback OTLP/HTTP receiver: answers every export with 200 and counts them, decoding nothing.

    ``keep``: each request's path, content type and body are kept in ``received`` (the tests decode them).
    """

    def __init__(self, *, keep: bool = False) -> None:
        self.requests = 0
        self.bytes = 0
        self.received: list[tuple[str, str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's name)
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size)
                outer.requests += 1
                outer.bytes += size
                if keep:
                    outer.received.append((self.path, self.headers.get("Content-Type", ""), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving and free the port."""
        self.server.shutdown()
        self.server.server_close()


def _counter(port: int, name: str) -> float:
    """A counter's value on a gateway's ``/metrics`` (0 when it is not there)."""
    with urllib.request.urlopen(_url(port, "/metrics"), timeout=10) as resp:
        return metric_total(resp.read().decode(), {name})


def _url(port: int, path: str) -> str:
    return f"http://127.0.0.1:{port}{path}"


def _interleaved(paths: dict[str, tuple[int, int]], script: Path, seconds: int, rounds: int,
                 stores: dict[str, str | None]) -> dict[str, Any]:
    """``bench.gateway.measure`` for ``paths`` (name -> port, server pid): a warm-up, then c=1 and c=16 slices.

    Each slice's CPU is read once the gateway has exported what the slice emitted and its store
    (``stores``: name -> the store process's URL) has stored it (:func:`bench.drain.drained`): the
    exporter and the store work behind the answers.
    """
    slice_s = max(1.0, seconds / rounds)
    tallies = {name: {c: wrk.Tally() for c in (1, 16)} for name in paths}
    chat = {name: _url(port, "/v1/chat/completions") for name, (port, _) in paths.items()}
    warm = {name: wrk.run(chat[name], script, 4, 2).requests for name in paths}
    settle = {name: drained(_url(port, "/metrics"), store_url=stores[name]) for name, (port, _) in paths.items()}
    for _ in range(rounds):
        for name, (_, pid) in paths.items():
            for c in (1, 16):
                wrk.run(chat[name], script, c, slice_s, tallies[name][c], pid, settle[name])
    return {name: {"c1": tallies[name][1].figures(), "c16": tallies[name][16].figures(),
                   "answered": warm[name] + tallies[name][1].requests + tallies[name][16].requests}
            for name in paths}


def run_otel(seconds: int, rounds: int) -> dict[str, Any]:
    """Measure both gateways interleaved; the figures of the module docstring."""
    tmp = Path(tempfile.mkdtemp(prefix="routelens-bench-otel-"))
    inst = free_port()
    base = f"http://127.0.0.1:{inst}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    receiver = OtlpReceiver()
    script = body_script(tmp, "post-auto", BODY, {"Content-Type": "application/json"})
    children: list[Child] = []
    ports = {"otel_off": free_port(), "otel_on": free_port()}
    configs: dict[str, Path] = {}
    for key, port in ports.items():
        cfg = {"gateway": {"port": port}, "storage": {"duckdb_path": str(tmp / f"{key}.duckdb")},
               "fleet": {"instances": [{"id": "sim-0", "model": "m", "url": base}]},
               "constraints": [{"name": "queue", "metric": "queue", "op": "<=", "threshold": 1e9}],
               "probes": {"enabled": False},
               "otel": {"enabled": key == "otel_on", "endpoint": receiver.url, "sample_ratio": 1.0}}
        configs[key] = tmp / f"{key}.yaml"
        configs[key].write_text(yaml.safe_dump(cfg))

    def start(name: str, argv: list[str], marker: str) -> Child:
        child = Child(name, argv, env, marker)
        children.append(child)
        assert child.wait_ready(120), f"{name} did not start: {child.tail()}"
        return child

    try:
        start("sim", [sys.executable, "-m", "app", "--config", str(configs["otel_off"]), "sim", "fleet",
                      "--instances", "1", "--base-port", str(inst), "--zero-delay"], "fleet ready")
        paths: dict[str, tuple[int, int]] = {}
        stores: dict[str, str | None] = {}
        for key, port in ports.items():
            child = start(key, [sys.executable, "-m", "app", "--config", str(configs[key]), "serve", "--port",
                                str(port), "--workers", "1"], "gateway ready")
            paths[key], stores[key] = (port, child.proc.pid), store_url_of(child.tail())
        before = thread_cpu(paths["otel_on"][1]).get("otel_export", 0.0)
        result: dict[str, Any] = {"seconds": seconds, "rounds": rounds,
                                  **_interleaved(paths, script, seconds, rounds, stores)}
        export_s = thread_cpu(paths["otel_on"][1]).get("otel_export", 0.0) - before
        result["spans"] = {"exported": _counter(ports["otel_on"], "routelens_otel_spans_exported_total"),
                           "dropped": _counter(ports["otel_on"], "routelens_otel_spans_dropped_total")}
    finally:
        while children:
            children.pop().stop()
        receiver.close()
    result["receiver"] = {"requests": receiver.requests, "bytes": receiver.bytes}
    per_request = export_s * 1e6 / max(1, result["otel_on"]["answered"])
    result["export_thread"] = {"cpu_us_per_request": round(per_request, 1), "share_pct": {
        c: round(100 * per_request / result["otel_off"][c]["cpu_us_per_request"], 1) for c in ("c1", "c16")}}
    result["cpu_rise_pct"] = {
        c: round(100 * (result["otel_on"][c]["cpu_us_per_request"] / result["otel_off"][c]["cpu_us_per_request"] - 1),
                 1) for c in ("c1", "c16")}
    return result


def main(seconds: int, rounds: int) -> int:
    """Print the figures as one JSON line."""
    print(json.dumps(run_otel(seconds, rounds)))
    return 0
