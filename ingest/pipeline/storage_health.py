"""What ``/health`` says of storage: the spool's state, and how long the store's writes have failed.

:meth:`TraceEmitter.health <ingest.pipeline.emitter.TraceEmitter.health>` reports storage degraded
(``/health`` answers 503 with the reason) when

- the configured spool takes no record (unwritable, its disk full): what is emitted is held in
  memory only, and a crash loses it; the store's relay refuses records meanwhile;
- the store's writes have failed for ``sink_failing_after_s`` or longer (a poison batch, a store
  that is down): nothing is lost (the spool keeps it) but nothing is stored either.

A backlog in memory by design (no spool configured) and a full spool under the ``block`` policy
(``emit()`` waits for room; the storage state says so) are not problems by themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ingest.pipeline.backlog import Backlog
from ingest.pipeline.stats import SinkStats
from ingest.record_sink import PreparedBatch, RecordBatch, RecordSink, WriteResult

__all__ = ["StorageHealth", "TimedSink"]


class TimedSink:
    """The store's sink as the batcher sees it, noting when the current run of failed writes began.

    Only the exception's type is kept for ``/health`` (which is open to all): a sink's message may
    quote a record. The batcher logs the whole message.
    """

    def __init__(self, sink: RecordSink, clock: Callable[[], float]) -> None:
        self.inner = sink
        self._clock = clock
        self.failing_since: float | None = None
        self.last_error = ""

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        """The store's own."""
        return self.inner.prepare(batch)

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """The store's own, noting when a run of failures began and the last one's type."""
        try:
            result = self.inner.write(prepared)
        except Exception as exc:
            if self.failing_since is None:
                self.failing_since = self._clock()
            self.last_error = type(exc).__name__
            raise
        self.failing_since = None
        return result

    def idle(self) -> None:
        """The store's own."""
        self.inner.idle()

    def close(self) -> None:
        """The store's own."""
        self.inner.close()


class StorageHealth:
    """The storage state and problems of one pipeline (module docstring).

    Args:
        backlog: The pipeline's backlog: its spool, and the records held in memory.
        sink: The store, timed.
        store: The store's counters.
        waiting: How many records are queued but not yet stored.
        monotonic: The clock that times the store's failures.
        failing_after_s: How long the store's writes may keep failing before it is a problem.
    """

    def __init__(self, backlog: Backlog, sink: TimedSink, store: SinkStats, waiting: Callable[[], int],
                 monotonic: Callable[[], float], failing_after_s: float) -> None:
        self.backlog, self.sink, self.store, self._waiting = backlog, sink, store, waiting
        self._monotonic, self._failing_after_s = monotonic, failing_after_s

    def state(self) -> dict[str, Any]:
        """The spool's state, the records waiting, how many only in memory, the store's failed writes."""
        backlog = self.backlog
        spool = ("ok" if backlog.spool_usable else "unavailable: records held in memory") if backlog.has_spool \
            else "none: records held in memory (no spool configured)"
        if backlog.blocked:
            spool = "full: emit() waits for room"
        return {"spool": spool, "pending": self._waiting(), "in_memory": len(backlog.memory),
                "store_failed_writes": self.store.failed}

    def problem(self) -> str | None:
        """Why storage is degraded, or None."""
        problems = []
        backlog = self.backlog
        if backlog.has_spool and not backlog.spool_usable:
            cause = backlog.spool_problem or "not usable"
            problems.append(f"trace spool unavailable ({cause}): {len(backlog.memory)} records held in memory only")
        since = self.sink.failing_since
        if since is not None and (failing := self._monotonic() - since) >= self._failing_after_s:
            problems.append(f"the trace store's writes have failed for {failing:.0f}s ({self.sink.last_error}, "
                            f"{self.store.failed} failed writes; {self._waiting()} records waiting)")
        return "; ".join(problems) or None
