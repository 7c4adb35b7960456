import threading
from collections.abc import Sequence

from ingest.emitter import TraceEmitter
from ingest.errors import SinkUnavailable
from schemas.trace import DecisionTrace
from tests.factories import make_trace


class FlakySink:
    """Fails the first `failures` batches, then stores; can be held shut with `gate`."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.stored: list[DecisionTrace] = []
        self.batches = 0
        self.gate = threading.Event()
        self.gate.set()
        self.closed = False

    def write_batch(self, traces: Sequence[DecisionTrace]) -> None:
        self.gate.wait(5)
        self.batches += 1
        if self.failures:
            self.failures -= 1
            raise SinkUnavailable("down")
        self.stored.extend(traces)

    def close(self) -> None:
        self.closed = True


def test_every_emitted_trace_is_written_in_order_on_close() -> None:
    sink = FlakySink()
    em = TraceEmitter(sink, batch_size=16, flush_interval_s=0.01).start()
    ids = [f"r{i}" for i in range(100)]
    for rid in ids:
        assert em.emit(make_trace(rid))
    em.close()
    assert [t.request_id for t in sink.stored] == ids
    assert em.stats.written == 100 and em.stats.dropped == 0 and sink.closed
    assert sink.batches >= 100 // 16


def test_pending_traces_are_visible_until_written() -> None:
    sink = FlakySink()
    sink.gate.clear()  # hold the sink so the trace stays pending
    em = TraceEmitter(sink, flush_interval_s=0.01).start()
    em.emit(make_trace("r1"))
    assert em.pending("r1") is not None
    sink.gate.set()
    em.close()
    assert em.pending("r1") is None and [t.request_id for t in sink.stored] == ["r1"]


def test_sink_failures_are_retried_not_lost() -> None:
    sink = FlakySink(failures=3)
    em = TraceEmitter(sink, flush_interval_s=0.01, sleep=lambda s: None).start()
    em.emit(make_trace("r1"))
    em.close()
    assert [t.request_id for t in sink.stored] == ["r1"] and em.stats.sink_errors == 3


def test_a_full_queue_counts_drops_and_never_blocks() -> None:
    sink = FlakySink()
    sink.gate.clear()
    em = TraceEmitter(sink, queue_size=2, batch_size=1, flush_interval_s=0.01).start()
    results = [em.emit(make_trace(f"r{i}")) for i in range(10)]
    assert results.count(False) == em.stats.dropped >= 10 - 3  # the writer may hold one
    sink.gate.set()
    em.close()
    assert em.stats.written + em.stats.dropped == 10
