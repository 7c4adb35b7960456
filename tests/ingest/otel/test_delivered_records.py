"""``routelens_sink_delivered_records_total{sink="otel"}`` counts only records whose spans the receiver took.

The sink dropped a failed export's spans (``routelens_otel_spans_dropped_total``) and returned as
after a success, so the exporter's queue counted the batch's records delivered: a receiver
answering 500, or none listening, showed every record delivered. A real OTLP/HTTP receiver on
loopback (or a port nobody listens on), the real exporter and pipeline, read through ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from app.run.procs import free_port
from bench.gateway_otel import OtlpReceiver
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.kinds import Kind
from ingest.otel import EXPORTER_NAME, OtelCollector, build_otel_sink
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.metrics import EmitterCollector
from schemas.config.otel import OtelSettings
from schemas.config.storage import StorageSettings

SETTINGS = StorageSettings(batch_size=512, flush_interval_ms=5)  # the whole backlog in one batch
N = 30


class Refusing(OtlpReceiver):
    """The benchmark's loopback OTLP/HTTP receiver, answering each export 500 (not retried, per the OTLP spec)."""

    def __init__(self) -> None:
        super().__init__()
        taking = self.server.RequestHandlerClass  # the receiver's handler: reads, counts, answers

        class Handler(taking):  # type: ignore[misc, valid-type]
            def send_response(self, code: int, message: str | None = None) -> None:
                super().send_response(500, message)

        self.server.RequestHandlerClass = Handler

    @property
    def posts(self) -> int:
        """Exports received."""
        return self.requests


@pytest.fixture
def refusing() -> Iterator[Refusing]:
    rec = Refusing()
    yield rec
    rec.close()


def exported(tmp_path: Path, factory: TraceFactory, endpoint: str) -> tuple[dict[str, float], TraceEmitter]:
    """N traces through a pipeline with the OTLP exporter to ``endpoint``: its series on /metrics, and the emitter."""
    sink = build_otel_sink(OtelSettings(enabled=True, endpoint=endpoint, timeout_s=0.5), environ={})
    assert sink is not None
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool", exporters={EXPORTER_NAME: sink})
    registry = CollectorRegistry()
    registry.register(EmitterCollector(em))
    registry.register(OtelCollector(sink.stats))
    for t in factory.traces(N):
        assert em.emit(t)
    em.start()
    assert em.flush(30) and em.flush_exporters(30)
    series = {}
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith(("routelens_sink_", "routelens_otel_")):
            name, value = line.rsplit(" ", 1)
            series[name] = float(value)
    em.close()
    assert store.count(Kind.TRACE) == N  # the store has every trace whatever the receiver did
    store.close()
    return series, em


def test_records_of_an_export_answered_500_are_dropped_not_delivered(tmp_path: Path, factory: TraceFactory,
                                                                     refusing: Refusing) -> None:
    series, em = exported(tmp_path, factory, refusing.url)
    assert refusing.posts == 1  # a 500 is not retried
    assert series['routelens_sink_delivered_records_total{sink="otel"}'] == 0
    assert series['routelens_sink_dropped_records_total{sink="otel"}'] == em.stats.queued
    assert series["routelens_otel_spans_dropped_total"] >= 2 * N  # each trace's request and decision spans at least
    assert series["routelens_otel_spans_exported_total"] == 0
    assert series["routelens_otel_spans_failed_exports_total"] == 1


def test_records_of_an_export_nobody_received_are_dropped_not_delivered(tmp_path: Path,
                                                                        factory: TraceFactory) -> None:
    series, em = exported(tmp_path, factory, f"http://127.0.0.1:{free_port()}")  # nothing listens there
    assert series['routelens_sink_delivered_records_total{sink="otel"}'] == 0
    assert series['routelens_sink_dropped_records_total{sink="otel"}'] == em.stats.queued
    assert series["routelens_otel_spans_dropped_total"] >= 2 * N
    assert series["routelens_otel_spans_exported_total"] == 0


def test_records_of_an_export_the_receiver_took_are_delivered(tmp_path: Path, factory: TraceFactory) -> None:
    receiver = OtlpReceiver()
    try:
        series, em = exported(tmp_path, factory, receiver.url)
    finally:
        receiver.close()
    assert receiver.requests == 1
    assert series['routelens_sink_delivered_records_total{sink="otel"}'] == em.stats.queued
    assert series['routelens_sink_dropped_records_total{sink="otel"}'] == 0
    assert series["routelens_otel_spans_exported_total"] >= 2 * N and series["routelens_otel_spans_dropped_total"] == 0
