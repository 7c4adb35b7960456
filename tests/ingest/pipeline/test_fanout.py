"""Records fan out to the store (durable, real DuckDB files) and to exporters (best-effort), independently."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.errors import SinkUnavailable
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.metrics import EmitterCollector
from ingest.pipeline.quarantine import Quarantine
from ingest.record_sink import PreparedBatch, RecordBatch, WriteResult
from schemas.config.storage import StorageSettings
from tests.ingest.pipeline.fake_exporter import Exporter
from tests.ingest.plain_values import plain_of
from tests.polling import wait_until

SETTINGS = StorageSettings(batch_size=16, flush_interval_ms=5)
EVER = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))


class Outage:
    """A real store behind a switch: while `down`, every write raises SinkUnavailable."""

    def __init__(self, store: DuckDBTraceStore, *, down: bool) -> None:
        self.store = store
        self.down = down

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        return self.store.prepare(batch)

    def write(self, prepared: PreparedBatch) -> WriteResult:
        if self.down:
            raise SinkUnavailable("the file is locked")
        return self.store.write(prepared)

    def idle(self) -> None:
        self.store.idle()

    def close(self) -> None:
        self.store.close()


def test_the_store_and_an_exporter_both_receive_every_record(tmp_path: Path, factory: TraceFactory) -> None:
    store, copy = DuckDBTraceStore(tmp_path / "store.duckdb"), DuckDBTraceStore(tmp_path / "copy.duckdb")
    recorder = Exporter()
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool",
                      exporters={"copy": copy, "otel": recorder}).start()  # any RecordSink can export
    traces = list(factory.traces(120))
    for t in traces:
        assert em.emit(t)
    assert em.flush(30) and em.flush_exporters(30)
    assert store.count(Kind.TRACE) == 120 and recorder.ids == [t.request_id for t in traces]
    assert copy.count(Kind.TRACE) == 120
    em.close()
    store.close()
    sinks = em.stats.sinks
    assert list(sinks) == ["store", "copy", "otel"]
    assert sinks["store"].delivered == sinks["copy"].delivered == sinks["otel"].delivered == em.stats.queued
    assert len(recorder.kinds) == em.stats.queued and recorder.closed
    assert all(s.failed == s.dropped == s.rejected == 0 for s in sinks.values())


def test_an_exporter_that_is_down_for_good_does_not_delay_the_store(tmp_path: Path, factory: TraceFactory) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    down = Exporter(down=True)
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool", exporters={"otel": down}).start()
    traces = list(factory.traces(200))
    for t in traces:
        em.emit(t)
    assert wait_until(lambda: store.count(Kind.TRACE) == 200, 30, every=0.02)
    assert em.flush(30) and em.backlog_size() == 0  # the spool forgot them: the exporter holds nothing of it
    assert wait_until(lambda: em.stats.sinks["otel"].failed >= 2, 30, every=0.02)
    em.close(timeout_s=0.5)
    store.close()
    otel, own = em.stats.sinks["otel"], em.stats.sinks["store"]
    assert own.delivered == em.stats.queued and own.failed == 0
    assert otel.delivered == 0 and otel.retried >= 1 and otel.failed >= otel.retried
    assert otel.dropped == em.stats.queued  # nothing sent: every record given up, and counted


def test_a_store_that_is_down_does_not_hold_back_an_exporter(tmp_path: Path, factory: TraceFactory) -> None:
    store = Outage(DuckDBTraceStore(tmp_path / "t.duckdb"), down=True)
    exporter = Exporter()
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool", exporters={"otel": exporter},
                      sleep=lambda s: time.sleep(0.01)).start()
    traces = list(factory.traces(100))
    for t in traces:
        em.emit(t)
    assert wait_until(lambda: len(exporter.ids) == 100, 30, every=0.02)
    assert wait_until(lambda: em.stats.sinks["store"].failed >= 1, 30, every=0.02)  # it tried, and failed
    assert em.stats.sinks["store"].delivered == 0
    store.down = False
    assert em.flush(30)
    em.close()
    assert store.store.count(Kind.TRACE) == 100
    store.close()


def test_a_slow_exporter_does_not_slow_the_store(tmp_path: Path, factory: TraceFactory) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    slow = Exporter(delay_s=0.05)
    slow.gate.clear()  # its first write hangs until the store has everything
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool", exporters={"slow": slow}).start()
    traces = list(factory.traces(200))
    for t in traces:
        em.emit(t)
    assert em.flush(30) and store.count(Kind.TRACE) == 200
    assert slow.ids == [] and em.exporters[0].queued > 0  # the store finished first: it did not wait
    slow.gate.set()
    assert em.flush_exporters(60)
    assert slow.ids == [t.request_id for t in traces] and slow.writes > 1
    em.close()
    store.close()


def test_failing_sinks_lose_nothing_of_the_store_across_a_restart(tmp_path: Path, factory: TraceFactory) -> None:
    traces = list(factory.traces(60))
    first = TraceEmitter(Outage(DuckDBTraceStore(tmp_path / "t.duckdb"), down=True), SETTINGS,
                         spool_dir=tmp_path / "spool", exporters={"otel": Exporter(down=True)}).start()
    for t in traces[:40]:
        first.emit(t)
    first.close(timeout_s=0.3)  # both down: the store's records stay in the spool
    assert first.stats.sinks["store"].delivered == 0 and first.stats.sinks["store"].dropped == 0

    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    exporter = Exporter()
    second = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool", exporters={"otel": exporter}).start()
    for t in traces[40:]:
        second.emit(t)
    assert second.flush(30) and second.flush_exporters(30)
    second.close()
    assert store.count(Kind.TRACE) == 60 and second.stats.replayed == first.stats.queued
    assert exporter.ids == [t.request_id for t in traces[40:]]  # at most once: the spool replays to the store only
    store.close()


def test_the_store_alone_validates_unchecked_traces_an_exporter_gets_them_as_they_are(
        tmp_path: Path, factory: TraceFactory) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    exporter = Exporter()
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool", quarantine=Quarantine(tmp_path / "q"),
                      exporters={"otel": exporter}).start()
    traces = list(factory.traces(20))
    for t in traces:
        assert em.emit_plain(plain_of(t))
    assert em.emit_plain(plain_of(traces[0]) | {"request_id": "r-invalid", "intent_confidence": 1.5})
    assert em.pending("r-invalid") is None and em.pending(traces[3].request_id) == traces[3]
    assert em.flush(30) and em.flush_exporters(30)
    assert wait_until(lambda: store.quarantined(*EVER), 30)  # the store quarantines it, as without exporters
    assert em.flush_exporters(30)
    em.close()
    assert store.count(Kind.TRACE) == 20 and store.get("r-invalid") is None
    store.close()
    assert exporter.kinds.count(Kind.TRACE_UNCHECKED) == 21  # not validated a second time on the export thread
    assert em.stats.sinks["store"].rejected == 1 and em.stats.sinks["otel"].rejected == 0


def test_per_sink_counters_are_exported_with_a_sink_label(tmp_path: Path, factory: TraceFactory) -> None:
    em = TraceEmitter(DuckDBTraceStore(tmp_path / "t.duckdb"), SETTINGS, spool_dir=tmp_path / "spool",
                      exporters={"otel": Exporter(down=True)}).start()
    registry = CollectorRegistry()
    registry.register(EmitterCollector(em))
    em.emit(factory.trace())
    assert em.flush(30)
    assert wait_until(lambda: em.stats.sinks["otel"].failed >= 1, 30, every=0.02)
    text = generate_latest(registry).decode()
    em.close(timeout_s=0.2)
    queued = em.stats.queued  # the trace and its scrape round's snapshots
    assert f'routelens_sink_delivered_records_total{{sink="store"}} {queued:.1f}' in text
    assert 'routelens_sink_delivered_records_total{sink="otel"} 0.0' in text
    assert 'routelens_sink_failed_writes_total{sink="store"} 0.0' in text
    assert 'routelens_sink_failed_writes_total{sink="otel"}' in text
    assert 'routelens_sink_failed_writes_total{sink="otel"} 0.0' not in text
    for name in ("rejected_records_total", "dropped_records_total", "retried_writes_total"):
        assert f'routelens_sink_{name}{{sink="otel"}}' in text and f'routelens_sink_{name}{{sink="store"}}' in text
    assert 'routelens_sink_queued_records{sink="store"} 0.0' in text
    assert f'routelens_sink_queued_records{{sink="otel"}} {queued:.1f}' in text


@pytest.mark.parametrize("name", ["store", ""])
def test_an_exporter_cannot_take_the_stores_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="cannot be named"):
        TraceEmitter(DuckDBTraceStore(tmp_path / "t.duckdb"), SETTINGS, exporters={name: Exporter()})


def test_the_single_sink_emitter_counts_its_store_as_before(tmp_path: Path, factory: TraceFactory) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    em = TraceEmitter(store, SETTINGS, spool_dir=tmp_path / "spool").start()
    for t in factory.traces(10):
        em.emit(t)
    assert em.flush(30) and em.flush_exporters(0)
    em.close()
    store.close()
    assert list(em.stats.sinks) == ["store"] and em.exporters == []
    assert em.stats.sinks["store"].delivered == em.stats.written == em.stats.queued
