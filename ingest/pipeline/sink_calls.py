"""The batcher's calls to its sink: a preparation that may raise, and writes that retry, halve and quarantine.

A sink that is down (``SinkUnavailable``, or any ``SinkError``: the sink's own failure) is retried
with exponential backoff (50 ms up to 5 s) for as long as it takes; the records wait.

A write that fails with any other exception is a fault of the records or of the sink's code, not
of the store being down: retrying it for ever would stop all storage behind one bad record. It is
tried :data:`FAULT_TRIES` times (with the same backoff); then the batch is written in halves, down
to single records (each tried :data:`FAULT_TRIES` times), and a record that fails alone is
quarantined with the exception as its reason while the others are stored. A piece whose
preparation raised is written the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ingest.errors import SinkError
from ingest.kinds import Kind
from ingest.pipeline.stats import PipelineStats, SinkStats
from ingest.record_sink import PreparedBatch, RecordSink, Rejected, WriteResult, batch_of, merge_prepared
from ingest.spool.segment import Frame

__all__ = ["FAULT_TRIES", "SinkCalls"]

log = logging.getLogger("ingest.pipeline.batcher")  # the batcher's records: one logger for both modules

# Writes of one batch (or, once it is split, of one record) failing with anything but a SinkError
# before it is split (or the record quarantined).
FAULT_TRIES = 3
_REASON_CHARS = 500  # of the exception's message, in a quarantine reason


class SinkCalls:
    """Prepares and writes on the batcher's threads so that no record and no fault stops storage.

    Args:
        sink: Where batches go.
        stats: Counters of the pipeline (sink errors).
        sink_stats: The sink's own counters (failed, retried).
        abort: Set when the batcher stops: a write that waits for a sink that is down gives up.
        sleep: Backoff sleep.
    """

    def __init__(self, sink: RecordSink, stats: PipelineStats, sink_stats: SinkStats, *, abort: threading.Event,
                 sleep: Callable[[float], object]) -> None:
        self.sink = sink
        self._stats = stats
        self._sink_stats = sink_stats
        self._abort = abort
        self._sleep = sleep

    def prepare(self, frames: list[Frame]) -> PreparedBatch | None:
        """The sink's preparation of ``frames``; None when it raised (the writer then writes them in parts)."""
        prepared = self._prepared(frames)
        if isinstance(prepared, Exception):
            log.error("trace sink could not prepare %d records (%s: %s); writing them in parts",
                      len(frames), type(prepared).__name__, prepared)
            return None
        return prepared

    def _prepared(self, frames: list[Frame]) -> PreparedBatch | Exception:
        try:
            return self.sink.prepare(batch_of((kind, payload) for _, kind, payload in frames))
        except Exception as exc:  # noqa: BLE001  (a record the sink cannot parse must not stop the pipeline)
            return exc

    def store(self, parts: list[PreparedBatch | None], frames: list[Frame]) -> WriteResult | None:
        """Write one group; None when the batcher was stopped while the sink was down."""
        if all(part is not None for part in parts):
            outcome = self._write(merge_prepared([part for part in parts if part is not None]), FAULT_TRIES)
            if not isinstance(outcome, Exception):
                return outcome
            log.error("trace sink failed %d times on a batch of %d records (%s: %s); writing it in parts to "
                      "quarantine the records it fails on", FAULT_TRIES, len(frames), type(outcome).__name__, outcome)
        result = WriteResult()
        return result if self._isolate(frames, result) else None

    def _isolate(self, frames: list[Frame], result: WriteResult) -> bool:
        """Write ``frames`` in halves, down to single records, adding to ``result``; quarantine a record failing alone.

        Halves go in order (a snapshot before the trace that refers to it). False when stopped.
        """
        prepared = self._prepared(frames)
        tries = FAULT_TRIES if len(frames) == 1 else 1
        outcome = prepared if isinstance(prepared, Exception) else self._write(prepared, tries)
        if outcome is None:
            return False
        if isinstance(outcome, WriteResult):
            for kind, (stored, duplicates) in outcome.by_kind.items():
                result.count(kind, stored, duplicates)
            result.rejected += outcome.rejected
            return True
        if len(frames) > 1:
            half = len(frames) // 2
            return self._isolate(frames[:half], result) and self._isolate(frames[half:], result)
        ((_, code, payload),) = frames
        what = f"{type(outcome).__name__}: {outcome}"[:_REASON_CHARS]
        if code == Kind.QUARANTINE:  # quarantining it again could go on for ever; its file line stays
            log.error("trace sink cannot store a quarantine record (%s); it is kept in the quarantine file only",
                      what)
            return True
        record_kind = Kind.TRACE if code == Kind.TRACE_UNCHECKED else Kind(code)
        result.rejected.append(Rejected(record_kind, payload, f"the store failed on this record alone ({what})"))
        return True

    def _write(self, prepared: PreparedBatch, tries: int) -> WriteResult | Exception | None:
        """Write ``prepared``; None when the batcher is stopped meanwhile.

        A sink that is down (``SinkUnavailable``, or another ``SinkError``: its own failure, not the
        records') is retried for as long as it takes; after ``tries`` writes failed on anything else,
        that exception is returned.
        """
        delay, faults = 0.05, 0
        while True:
            try:
                return self.sink.write(prepared)
            except Exception as exc:  # noqa: BLE001  (the sink down: keep the batch; any other fault: bounded)
                self._stats.sink_errors += 1
                self._sink_stats.failed += 1
                if not isinstance(exc, SinkError):
                    faults += 1
                    if faults >= tries:
                        return exc
                log.warning("trace sink failed (%s: %s); retrying in %.2fs", type(exc).__name__, exc, delay)
                if self._abort.is_set():
                    return None
                self._sleep(delay)
                self._sink_stats.retried += 1
                delay = min(delay * 2, 5.0)
