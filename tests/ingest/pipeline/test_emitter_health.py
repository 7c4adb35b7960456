"""What ``/health`` turns 503 for (``TraceEmitter.health``), and records that must be durable or refused.

The audit: a spool that took no record kept the traces in memory while ``/health`` said ok, and
a store whose writes failed batch after batch (a poison batch) was ok too. And the store's relay
confirmed records it held only in memory (``emit_encoded``): a crash of the store lost them.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.synthetic import TraceFactory
from ingest.errors import SpoolUnavailable
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from schemas.config.storage import StorageSettings
from tests.ingest.pipeline.test_emitter import FlakySink
from tests.polling import wait_until

SETTINGS = StorageSettings(batch_size=16, flush_interval_ms=5)


def unwritable(tmp_path: Path) -> Path:
    """A spool folder that cannot be made, even by root: its parent is a file."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    return blocker / "spool"


def test_a_spool_that_takes_no_record_is_a_health_problem_naming_it(tmp_path: Path) -> None:
    em = TraceEmitter(FlakySink(), SETTINGS, spool_dir=unwritable(tmp_path),
                      quarantine=Quarantine(tmp_path / "q"))  # not started: what is emitted stays
    try:
        for trace in TraceFactory(seed=1).traces(3):
            em.emit(trace)
        problem = em.health()
        assert problem is not None and problem.startswith("trace spool unavailable (")
        held = len(em.backlog.memory)  # the traces and the snapshots they point at
        assert held >= 3 and "blocker" in problem and problem.endswith(f": {held} records held in memory only")
        assert em.storage_state()["spool"] == "unavailable: records held in memory"
    finally:
        em.close(timeout_s=0.5)


def test_a_working_spool_or_none_configured_is_no_problem(tmp_path: Path) -> None:
    spooled = TraceEmitter(FlakySink(), SETTINGS, spool_dir=tmp_path / "spool").start()
    in_memory = TraceEmitter(FlakySink(), SETTINGS).start()  # no spool by design: nothing to report
    try:
        for em in (spooled, in_memory):
            em.emit(next(iter(TraceFactory(seed=2).traces(1))))
            assert em.flush(10) and em.health() is None
        assert spooled.storage_state()["spool"] == "ok"
        assert in_memory.storage_state()["spool"] == "none: records held in memory (no spool configured)"
    finally:
        spooled.close()
        in_memory.close()


def test_store_writes_failing_past_the_threshold_are_a_problem_until_one_succeeds(tmp_path: Path) -> None:
    now = [100.0]
    sink = FlakySink(down=True)
    em = TraceEmitter(sink, SETTINGS, spool_dir=tmp_path / "spool", sleep=lambda _: time.sleep(0.01),
                      sink_failing_after_s=10.0, monotonic=lambda: now[0]).start()
    try:
        em.emit(next(iter(TraceFactory(seed=3).traces(1))))
        assert wait_until(lambda: em.stats.sinks["store"].failed >= 3, 10, every=0.01)
        assert em.health() is None  # failing, but not for long yet: a store restarting is no problem
        now[0] += 10.0
        problem = em.health()
        assert problem is not None and problem.startswith("the trace store's writes have failed for 10s "
                                                          "(SinkUnavailable, ")
        assert problem.endswith(f"; {em.backlog_size()} records waiting)")
        sink.down = False
        assert em.flush(10) and em.health() is None
    finally:
        em.close()


def test_a_durable_append_the_spool_cannot_take_is_refused_and_not_kept(tmp_path: Path) -> None:
    em = TraceEmitter(FlakySink(), SETTINGS, spool_dir=unwritable(tmp_path)).start()
    try:
        with pytest.raises(SpoolUnavailable, match="blocker"):
            em.emit_encoded([(Kind.TRACE, b'{"request_id": "r1"}'), (Kind.TRACE, b'{"request_id": "r2"}')],
                            durable=True)
        assert len(em.backlog.memory) == 0 and em.stats.queued == 0  # nothing a crash could lose
        assert em.emit_encoded([(Kind.TRACE, b'{"request_id": "r3"}')]) == 1  # not durable: memory, as before
    finally:
        em.close(timeout_s=0.5)
