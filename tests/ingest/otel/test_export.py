"""The OTLP sink in the real pipeline, with the SDK's real exporter: a loopback receiver, or none at all."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry, generate_latest

from app.run.procs import free_port
from bench.gateway_otel import OtlpReceiver
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.kinds import Kind
from ingest.otel import EXPORTER_NAME, OtelCollector, build_otel_sink, ids_of, traces_endpoint
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.metrics import EmitterCollector
from schemas.config.otel import OtelSettings
from schemas.config.storage import StorageSettings
from tests.polling import wait_until

SETTINGS = StorageSettings(batch_size=16, flush_interval_ms=5)


class Receiver(OtlpReceiver):
    """The benchmark's loopback receiver, keeping what it gets."""

    def __init__(self) -> None:
        super().__init__(keep=True)

    def spans(self) -> list[tuple[str, str, str]]:
        """``(trace id, span id, name)`` of every span received."""
        return [(s.trace_id.hex(), s.span_id.hex(), s.name) for _, _, body in self.received
                for rs in ExportTraceServiceRequest.FromString(body).resource_spans for ss in rs.scope_spans
                for s in ss.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    yield rec
    rec.close()


def test_spans_reach_the_receiver_at_endpoint_v1_traces(tmp_path: Path, factory: TraceFactory,
                                                         receiver: Receiver) -> None:
    sink = build_otel_sink(OtelSettings(enabled=True, endpoint=receiver.url + "/"), environ={})
    assert sink is not None
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool", exporters={EXPORTER_NAME: sink}).start()
    traces = list(factory.traces(40))
    for t in traces:
        assert em.emit(t)
    assert em.flush(30) and em.flush_exporters(30)
    em.close()
    assert {path for path, _, _ in receiver.received} == {"/v1/traces"}
    assert {ctype for _, ctype, _ in receiver.received} == {"application/x-protobuf"}
    got = receiver.spans()
    assert {trace_id for trace_id, _, _ in got} == {ids_of({"request_id": t.request_id})[0] for t in traces}
    assert sum(1 for _, _, name in got if name == "routelens.decide") == 40
    assert sink.stats.exported == len(got) and sink.stats.dropped == 0
    resource = ExportTraceServiceRequest.FromString(receiver.received[0][2]).resource_spans[0].resource
    assert {a.key: a.value.string_value for a in resource.attributes}["service.name"] == "routelens"
    assert store.count(Kind.TRACE) == 40
    store.close()


def test_receiver_down_the_store_keeps_every_trace_and_the_drop_counter_moves(tmp_path: Path,
                                                                             factory: TraceFactory) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    sink = build_otel_sink(OtelSettings(enabled=True, endpoint=nobody, timeout_s=0.5), environ={})
    assert sink is not None
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool", exporters={EXPORTER_NAME: sink}).start()
    registry = CollectorRegistry()
    registry.register(EmitterCollector(em))
    registry.register(OtelCollector(sink.stats))
    traces = list(factory.traces(60))
    for t in traces:
        assert em.emit(t)
    assert em.flush(30)
    assert store.count(Kind.TRACE) == 60
    assert wait_until(lambda: sink.stats.dropped > 0, 30, every=0.05)
    text = generate_latest(registry).decode()
    dropped = next(line for line in text.splitlines() if line.startswith("routelens_otel_spans_dropped_total"))
    assert float(dropped.split()[1]) > 0
    em.close(timeout_s=5)
    assert sink.stats.exported == 0
    store.close()


@pytest.mark.parametrize(("endpoint", "env", "expected"), [
    ("http://c:4318", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1"}, "http://c:4318/v1/traces"),
    (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:2/custom", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1"},
     "http://t:2/custom"),
    (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1/"}, "http://x:1/v1/traces"),
    (None, {}, "http://localhost:4318/v1/traces"),
])
def test_endpoint_falls_back_to_the_standard_variables(endpoint: str | None, env: dict[str, str],
                                                       expected: str) -> None:
    assert traces_endpoint(OtelSettings(enabled=True, endpoint=endpoint), env) == expected


def test_disabled_builds_nothing() -> None:
    assert build_otel_sink(OtelSettings(), environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1"}) is None


class Flaky(BaseHTTPRequestHandler):
    """Answers 503 to the first two posts, then 200; keeps what it received."""

    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802  (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Flaky.received.append((dict(self.headers), body))
        self.send_response(503 if len(Flaky.received) <= 2 else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_transport_retries_a_503_and_honours_the_headers_and_compression_variables() -> None:
    import gzip
    import random

    from ingest.otel import OtlpHttp

    Flaky.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    slept: list[float] = []
    try:
        env = {"OTEL_EXPORTER_OTLP_HEADERS": "x-team=router,authorization=Bearer%20k",
               "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip"}
        http = OtlpHttp(f"http://127.0.0.1:{server.server_address[1]}/v1/traces", timeout_s=30, environ=env,
                        rand=random.Random(1).random, sleep=slept.append)
        assert http.send(b"\x0a\x00payload")
        http.close()
    finally:
        server.shutdown()
        server.server_close()
    assert len(Flaky.received) == 3 and len(slept) == 2 and slept[1] > slept[0]  # backed off, doubling
    headers, body = Flaky.received[-1]
    assert gzip.decompress(body) == b"\x0a\x00payload" and headers["Content-Encoding"] == "gzip"
    assert headers["x-team"] == "router" and headers["authorization"] == "Bearer k"
    assert headers["Content-Type"] == "application/x-protobuf"
