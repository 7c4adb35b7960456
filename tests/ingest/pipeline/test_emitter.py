import sys
import threading
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bench.synthetic import TraceFactory
from ingest.errors import SinkUnavailable
from ingest.kinds import Kind
from ingest.pipeline import batcher
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.metrics import EmitterCollector
from ingest.pipeline.quarantine import Quarantine
from ingest.record_sink import PreparedBatch, RecordBatch, Rejected, WriteResult
from schemas.config.storage import SpoolSettings, StorageSettings
from tests.polling import wait_until

SEG = 64 * 1024


class FlakySink:
    """Keeps what it is given; fails the first `failures` writes; `gate` holds writes back."""

    def __init__(self, failures: int = 0, down: bool = False) -> None:
        self.failures = failures
        self.down = down
        self.ids: list[str] = []
        self.kinds: list[Kind] = []
        self.gate = threading.Event()
        self.gate.set()
        self.closed = False
        self.refuse: set[str] = set()

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        return PreparedBatch(batch)

    def write(self, prepared: PreparedBatch) -> WriteResult:
        self.gate.wait(10)
        if self.down or self.failures:
            self.failures = max(0, self.failures - 1)
            raise SinkUnavailable("down")
        result = WriteResult()
        for kind, payloads in prepared.batch.payloads.items():
            for p in payloads:
                self.kinds.append(kind)
                if kind is Kind.TRACE:
                    self.ids.append(orjson.loads(p)["request_id"])
            result.count(kind, len(payloads), 0)
        return result

    def idle(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class SizingSink(FlakySink):
    """Also records how many records each write held."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def write(self, prepared: PreparedBatch) -> WriteResult:
        self.sizes.append(len(prepared.batch))
        return super().write(prepared)


def settings(**spool: object) -> StorageSettings:
    sp = SpoolSettings(segment_bytes=SEG, **spool)  # type: ignore[arg-type]
    return StorageSettings(batch_size=16, flush_interval_ms=5, spool=sp)


def fast(sink: FlakySink, tmp_path: Path | None, st: StorageSettings | None = None, **kw: object) -> TraceEmitter:
    return TraceEmitter(sink, st or settings(), spool_dir=tmp_path, sleep=lambda s: None, **kw).start()  # type: ignore[arg-type]


def test_every_trace_is_written_in_order_and_counted(tmp_path: Path, factory: TraceFactory) -> None:
    sink = FlakySink()
    em = fast(sink, tmp_path)
    traces = list(factory.traces(100))
    assert all(em.emit(t) for t in traces)
    em.close()
    assert sink.ids == [t.request_id for t in traces] and sink.closed
    s = em.stats
    assert sink.kinds.count(Kind.SNAPSHOT) == 20 * 4  # a scrape round every 5 traces, 4 instances each
    assert s.queued == s.spooled == s.written == 100 + 20 * 4
    assert s.dropped == s.quarantined == s.sink_errors == 0


@pytest.mark.parametrize(("before_ms", "setting_ms", "after_ms"), [
    (5.0, 1.0, 1.0),  # lowered for the pipeline's threads
    (0.2, 1.0, 0.2),  # never raised
    (5.0, None, 5.0),  # null: left alone
])
def test_starting_lowers_the_thread_switch_interval_as_configured(
    before_ms: float, setting_ms: float | None, after_ms: float,
) -> None:
    old = sys.getswitchinterval()
    try:
        sys.setswitchinterval(before_ms / 1000)
        em = fast(FlakySink(), None, StorageSettings(gil_switch_interval_ms=setting_ms))
        em.close()
        assert sys.getswitchinterval() == pytest.approx(after_ms / 1000)
    finally:
        sys.setswitchinterval(old)


def test_an_idle_sink_gets_a_piece_without_waiting_for_a_full_batch(tmp_path: Path, factory: TraceFactory,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batcher, "PIECE", 10)
    sink = SizingSink()
    em = fast(sink, tmp_path, StorageSettings(batch_size=1000, flush_interval_ms=60_000))
    for t in factory.traces(6):  # 6 traces and 8 snapshots: one piece, far from a batch
        em.emit(t)
    wait_until(lambda: sink.sizes, 2, every=0.01)
    assert sink.sizes == [10]
    em.close()
    assert sum(sink.sizes) == 14


def test_pieces_parsed_while_the_sink_is_busy_go_in_one_write(tmp_path: Path, factory: TraceFactory,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batcher, "PIECE", 10)
    sink = SizingSink()
    sink.gate.clear()
    em = fast(sink, tmp_path, StorageSettings(batch_size=40, flush_interval_ms=200))
    traces = list(factory.traces(100))
    for t in traces:
        em.emit(t)
    # pieces are parsed while the first write waits at the gate, until the queue is full
    assert wait_until(em.batcher._ready.full, 5, every=0.01)
    sink.gate.set()
    em.close()
    assert sink.ids == [t.request_id for t in traces] and sum(sink.sizes) == 180  # and 80 snapshots
    assert max(sink.sizes) == 40 and all(size % 10 == 0 for size in sink.sizes[:-1])  # whole pieces, merged


class UpkeepSink(FlakySink):
    """Notes how many traces were stored at each upkeep call, then fails the upkeep."""

    def __init__(self) -> None:
        super().__init__()
        self.stored_at_idle: list[int] = []

    def idle(self) -> None:
        self.stored_at_idle.append(len(self.ids))
        raise OSError("upkeep broke")


def test_the_sink_gets_upkeep_only_when_nothing_waits_and_its_failure_loses_nothing(
        tmp_path: Path, factory: TraceFactory, caplog: pytest.LogCaptureFixture) -> None:
    sink = UpkeepSink()
    sink.gate.clear()
    em = fast(sink, tmp_path)
    traces = list(factory.traces(50))
    for t in traces:
        em.emit(t)
    sink.gate.set()  # several writes of 16 follow, with more waiting behind each
    assert em.flush(10)
    wait_until(lambda: 50 in sink.stored_at_idle, 5, every=0.01)
    em.close()
    assert sink.ids == [t.request_id for t in traces]
    assert 50 in sink.stored_at_idle and set(sink.stored_at_idle) <= {0, 50}
    assert "upkeep failed (OSError: upkeep broke)" in caplog.text


def test_a_trace_is_visible_until_it_is_stored(tmp_path: Path, factory: TraceFactory) -> None:
    sink = FlakySink()
    sink.gate.clear()
    em = fast(sink, tmp_path)
    trace = factory.trace()
    em.emit(trace)
    assert em.pending(trace.request_id) is trace
    sink.gate.set()
    assert em.flush(10)
    assert em.pending(trace.request_id) is None
    em.close()


def test_while_the_store_is_down_only_the_newest_pending_traces_are_kept(tmp_path: Path,
                                                                         factory: TraceFactory) -> None:
    sink = FlakySink(down=True)
    st = settings().model_copy(update={"pending_traces": 3})
    em = fast(sink, tmp_path, st)
    traces = list(factory.traces(10))
    assert all(em.emit(t) for t in traces)
    assert [t.request_id for t in traces if em.pending(t.request_id) is not None] == [
        t.request_id for t in traces[-3:]]  # the newest three; the older ones wait in the spool alone
    sink.down = False
    em.close()
    assert sink.ids == [t.request_id for t in traces]  # nothing lost: the bound is on what is held in memory
    assert all(em.pending(t.request_id) is None for t in traces)


def test_a_big_fleet_s_pending_traces_are_also_bounded_by_their_candidates(tmp_path: Path,
                                                                            factory: TraceFactory) -> None:
    # 4,096 pending traces of 200 candidates held 1.7 GB while a store was down: the count alone bounded them
    sink = FlakySink(down=True)
    em = fast(sink, tmp_path, settings().model_copy(update={"pending_traces": 4}))  # 4 x 8 = 32 candidates kept
    base = factory.trace(request_id="req_big_0")
    big = [base.model_copy(update={"request_id": f"req_big_{n}", "candidates": base.candidates[:1] * 20})
           for n in range(4)]
    small = factory.trace(request_id="req_small")
    assert all(em.emit(t) for t in [*big, small])
    kept = [t.request_id for t in [*big, small] if em.pending(t.request_id) is not None]
    assert kept == ["req_big_3", "req_small"]  # 20 + a few candidates: the older big ones went first
    sink.down = False
    em.close()
    assert sink.ids == [t.request_id for t in [*big, small]]  # nothing lost: they wait in the spool


def test_sink_failures_are_retried_not_lost(tmp_path: Path, factory: TraceFactory) -> None:
    sink = FlakySink(failures=3)
    em = fast(sink, tmp_path)
    em.emit(factory.trace(request_id="req_retry"))
    em.close()
    assert sink.ids == ["req_retry"] and em.stats.sink_errors == 3


def test_what_a_down_sink_did_not_take_is_replayed_after_a_restart(tmp_path: Path, factory: TraceFactory) -> None:
    first = fast(FlakySink(down=True), tmp_path)
    traces = list(factory.traces(40))
    for t in traces:
        first.emit(t)
    first.close(timeout_s=0.2)
    assert first.stats.written == 0 and first.stats.dropped == 0
    sink = FlakySink()
    second = fast(sink, tmp_path)
    assert second.flush(10)
    second.close()
    assert sink.ids == [t.request_id for t in traces]
    assert second.stats.replayed == len(sink.kinds) and second.stats.queued == 0


def test_a_full_spool_blocks_emit_until_the_sink_frees_room(tmp_path: Path, factory: TraceFactory,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    sink = FlakySink()
    sink.gate.clear()
    em = fast(sink, tmp_path, settings(max_bytes=2 * SEG, full_policy="block"))
    done = threading.Event()

    def produce() -> None:
        for t in factory.traces(200):
            em.emit(t)
        done.set()

    threading.Thread(target=produce, daemon=True).start()
    assert not done.wait(1.0), "emit should block while the spool is full"
    assert em.backlog.blocked and em.stats.spool_errors > 0
    assert "reached its limit" in caplog.text
    sink.gate.set()
    assert done.wait(20)
    em.close()
    assert len(sink.ids) == 200 and em.stats.dropped == 0


def test_drop_oldest_counts_and_logs_what_it_drops(tmp_path: Path, factory: TraceFactory,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    sink = FlakySink(down=True)
    em = fast(sink, tmp_path, settings(max_bytes=2 * SEG, full_policy="drop_oldest"))
    traces = list(factory.traces(200))
    for t in traces:
        em.emit(t)
    assert em.stats.dropped > 0 and "dropped" in caplog.text
    sink.down = False
    assert em.flush(20)
    em.close()
    order = [t.request_id for t in traces]
    positions = [order.index(rid) for rid in sink.ids]
    assert positions == sorted(positions) and positions[-1] == len(traces) - 1  # in order, newest kept
    assert len(sink.kinds) + em.stats.dropped == em.stats.queued  # every record accounted for


def test_an_unwritable_spool_falls_back_to_memory_and_says_so(tmp_path: Path, factory: TraceFactory,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("in the way")
    sink = FlakySink()
    em = fast(sink, blocker / "spool")
    registry = CollectorRegistry()
    registry.register(EmitterCollector(em))
    for t in factory.traces(20):
        em.emit(t)
    text = generate_latest(registry).decode()
    assert "routelens_spool_available 0.0" in text and "is not usable" in caplog.text
    em.close()
    assert len(sink.ids) == 20 and em.stats.spooled == 0 and em.stats.spool_errors >= 1


def test_an_oversized_record_is_quarantined_with_its_reason(tmp_path: Path, factory: TraceFactory) -> None:
    sink = FlakySink()
    st = StorageSettings(batch_size=16, flush_interval_ms=5, spool=SpoolSettings(segment_bytes=SEG,
                                                                                 max_record_bytes=1024))
    em = fast(sink, tmp_path / "spool", st, quarantine=Quarantine(tmp_path / "q"))
    assert em.emit(factory.trace()) is False
    em.close()
    assert em.stats.quarantined == 1 and sink.kinds.count(Kind.QUARANTINE) == 1
    line = orjson.loads(next((tmp_path / "q").glob("*.jsonl")).read_bytes())
    assert "exceeds the limit of 1024" in line["reason"] and line["source"] == "emit"


def test_counters_are_exported_for_prometheus(tmp_path: Path, factory: TraceFactory) -> None:
    em = fast(FlakySink(), tmp_path)
    registry = CollectorRegistry()
    registry.register(EmitterCollector(em))
    em.emit(factory.trace())
    em.flush(10)
    text = generate_latest(registry).decode()
    em.close()
    for name in ("queued", "spooled", "written", "quarantined", "dropped"):
        assert f"routelens_traces_{name}_total" in text
    assert "routelens_traces_dropped_total 0.0" in text and "routelens_spool_available 1.0" in text
    assert 'routelens_records_written_total{kind="trace"} 1.0' in text
    assert 'routelens_records_duplicates_total{kind="trace"} 0.0' in text


def test_emit_rejects_objects_it_does_not_store(tmp_path: Path) -> None:
    em = fast(FlakySink(), tmp_path)
    with pytest.raises(TypeError):
        em.emit(SpoolSettings())
    em.close()


class RejectingSink(FlakySink):
    """Refuses every tenth trace, as Elasticsearch refuses a document it cannot map."""

    def write(self, prepared: PreparedBatch) -> WriteResult:
        result = super().write(prepared)
        for p in prepared.batch.payloads.get(Kind.TRACE, []):
            if orjson.loads(p)["request_id"] in self.refuse:
                result.rejected.append(Rejected(Kind.TRACE, p, "mapper_parsing_exception"))
        return result


def test_a_blocked_emitter_does_not_stop_the_batcher_from_quarantining(tmp_path: Path,
                                                                       factory: TraceFactory) -> None:
    traces = list(factory.traces(200))
    sink = RejectingSink()
    sink.refuse = {t.request_id for t in traces[::10]}
    sink.gate.clear()
    em = fast(sink, tmp_path, settings(max_bytes=2 * SEG, full_policy="block"))
    done = threading.Event()

    def produce() -> None:
        for t in traces:
            em.emit(t)
        done.set()

    threading.Thread(target=produce, daemon=True).start()
    assert not done.wait(0.5) and em.backlog.blocked
    sink.gate.set()
    assert done.wait(20), "the emitter and the batcher deadlocked"
    assert em.flush(20)
    em.close()
    assert em.stats.quarantined == 20 and len(sink.ids) == 200


def test_a_damaged_spool_at_start_up_is_reported_once_and_the_rest_is_stored(
        tmp_path: Path, factory: TraceFactory) -> None:
    down = FlakySink(down=True)
    em = fast(down, tmp_path / "spool")
    traces = [factory.trace() for _ in range(30)]
    for t in traces:
        em.emit(t)
    em.close(0.2)  # the sink never came back: everything stays in the spool
    seg = sorted((tmp_path / "spool").glob("*.seg"))[0]
    data = bytearray(seg.read_bytes())
    data[len(data) // 8] ^= 0xFF  # somewhere inside the written frames
    seg.write_bytes(bytes(data))

    sink = FlakySink()
    again = fast(sink, tmp_path / "spool")  # starts despite the damage
    assert again.flush(10)
    again.close()
    damaged = [i for i, k in enumerate(sink.kinds) if k is Kind.QUARANTINE]
    assert len(damaged) == 1 and again.stats.corrupted >= 1
    assert set(sink.ids) < {t.request_id for t in traces} and len(sink.ids) >= 1
