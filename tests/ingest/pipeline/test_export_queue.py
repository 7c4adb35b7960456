"""An exporter's queue: bounded, drops the newest when full, retries for a while, counts everything."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import orjson
import pytest

from ingest.kinds import Kind
from ingest.pipeline.export_queue import ExportQueue
from ingest.pipeline.stats import SinkStats
from tests.ingest.pipeline.fake_exporter import Exporter


def trace(rid: str) -> bytes:
    return orjson.dumps({"request_id": rid})


def queue(exporter: Exporter, *, capacity: int = 100, retry_for_s: float = 60.0,
          clock: Iterator[float] | None = None) -> ExportQueue:
    ticks = clock or itertools.count()
    return ExportQueue("otel", exporter, SinkStats(), capacity=capacity, batch_size=4, flush_interval_s=0.005,
                       retry_for_s=retry_for_s, clock=lambda: float(next(ticks)))


def test_a_full_queue_drops_the_newest_records_and_counts_them(caplog: pytest.LogCaptureFixture) -> None:
    exporter = Exporter()
    q = queue(exporter, capacity=5)  # not started: nothing leaves the queue
    for i in range(8):
        q.offer(Kind.TRACE, trace(f"r{i}"))
    assert q.queued == 5 and q.stats.dropped == 3 and "dropping new ones" in caplog.text
    q.start()
    assert q.flush(10)
    q.stop(10)
    assert exporter.ids == [f"r{i}" for i in range(5)] and exporter.closed
    assert (q.stats.delivered, q.stats.dropped, q.stats.failed) == (5, 3, 0)


def test_a_lasting_overflow_is_said_once_every_five_seconds(caplog: pytest.LogCaptureFixture) -> None:
    q = queue(Exporter(), capacity=1, clock=itertools.count())  # one clock second per dropped record
    for i in range(13):  # 12 drops over 12 s: said at 0, 5 and 10 s
        q.offer(Kind.TRACE, trace(f"r{i}"))
    assert q.stats.dropped == 12
    assert caplog.text.count("dropping new ones") == 3


def test_an_unavailable_exporter_is_retried_for_a_while_then_the_batch_is_dropped() -> None:
    exporter = Exporter(down=True)
    q = queue(exporter, retry_for_s=25, clock=itertools.count(0, 10))  # 10 s pass between two looks
    q.start()
    for i in range(3):
        q.offer(Kind.TRACE, trace(f"r{i}"))
    assert q.flush(10)
    s = q.stats
    assert (s.delivered, s.dropped, s.failed, s.retried) == (0, 3, 3, 2)
    exporter.down = False
    q.offer(Kind.TRACE, trace("r3"))  # the next batch goes through
    assert q.flush(10)
    q.stop(10)
    assert exporter.ids == ["r3"] and s.delivered == 1


def test_a_fault_in_the_exporter_drops_its_batch_at_once_and_the_next_goes_on() -> None:
    exporter = Exporter()
    exporter.broken = True
    q = queue(exporter)
    for i in range(4):
        q.offer(Kind.TRACE, trace(f"r{i}"))
    q.start()
    assert q.flush(10)
    q.offer(Kind.TRACE, trace("r4"))
    assert q.flush(10)
    q.stop(10)
    assert exporter.ids == ["r4"]
    assert (q.stats.dropped, q.stats.failed, q.stats.retried, q.stats.delivered) == (4, 1, 0, 1)


def test_records_the_exporter_refuses_are_counted_not_delivered() -> None:
    exporter = Exporter()
    exporter.refuse = {"r1"}
    q = queue(exporter)
    q.start()
    for i in range(3):
        q.offer(Kind.TRACE, trace(f"r{i}"))
    assert q.flush(10)
    q.stop(10)
    assert exporter.ids == ["r0", "r2"] and (q.stats.delivered, q.stats.rejected) == (2, 1)


def test_what_is_not_sent_by_the_stop_is_dropped_and_counted() -> None:
    exporter = Exporter()
    exporter.gate.clear()  # the first write hangs
    q = queue(exporter)
    q.start()
    for i in range(10):
        q.offer(Kind.TRACE, trace(f"r{i}"))
    assert not q.flush(0.1)
    exporter.gate.set()
    exporter.down = True  # from now on nothing gets through
    q.stop(0.1)
    assert q.stats.delivered + q.stats.dropped == 10 and q.stats.dropped >= 6
    assert exporter.closed and q.queued == 0
