"""The trace emitter: ``emit()`` never blocks the request path.

Traces go into a bounded in-memory queue; one background thread drains it in batches into a
:class:`ingest.base.TraceSink`. While a trace waits it stays visible through :meth:`pending`, so a
client that asks for its trace right after the response finds it. When the sink is unavailable the
batch is kept and retried with backoff; when the queue is full, ``emit`` counts the trace as
dropped and says so in the log. (The durable spool that makes a full queue lossless belongs to the
trace-pipeline issue.)
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ingest.base import TraceSink
from ingest.errors import SinkError
from schemas.trace import DecisionTrace

__all__ = ["EmitterStats", "TraceEmitter"]

log = logging.getLogger(__name__)


@dataclass
class EmitterStats:
    """Counters of the emitter; ``queued == written + dropped + len(queue)`` at rest."""

    queued: int = 0
    written: int = 0
    dropped: int = 0
    sink_errors: int = 0


class TraceEmitter:
    """Batches traces from any thread into one sink on a background thread.

    Args:
        sink: Where batches go; only the emitter's thread calls it.
        queue_size: Traces held in memory at most.
        batch_size: Traces per ``write_batch`` call at most.
        flush_interval_s: Longest wait before a partial batch is written.
        sleep: Injected for the retry backoff (tests pass a fake).
    """

    def __init__(
        self,
        sink: TraceSink,
        *,
        queue_size: int = 50_000,
        batch_size: int = 1024,
        flush_interval_s: float = 0.1,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._sink = sink
        self._queue: queue.Queue[DecisionTrace] = queue.Queue(maxsize=queue_size)
        self._batch_size = batch_size
        self._flush_interval_s = flush_interval_s
        self._stop = threading.Event()
        self._closing = threading.Event()
        self._sleep = sleep or self._stop.wait
        self._pending: dict[str, DecisionTrace] = {}
        self.stats = EmitterStats()
        self._thread = threading.Thread(target=self._run, name="trace-emitter", daemon=True)

    def start(self) -> TraceEmitter:
        """Start the background writer; returns self."""
        self._thread.start()
        return self

    def emit(self, trace: DecisionTrace) -> bool:
        """Queue ``trace`` without blocking; False when it had to be dropped."""
        self._pending[trace.request_id] = trace
        try:
            self._queue.put_nowait(trace)
        except queue.Full:
            self._pending.pop(trace.request_id, None)
            self.stats.dropped += 1
            log.error("trace queue full: dropped trace %s", trace.request_id)
            return False
        self.stats.queued += 1
        return True

    def backlog(self) -> int:
        """Return how many traces are emitted but not yet stored."""
        return len(self._pending)

    def pending(self, request_id: str) -> DecisionTrace | None:
        """Return a trace that was emitted but is not stored yet."""
        return self._pending.get(request_id)

    def close(self, timeout_s: float = 10.0) -> None:
        """Write everything queued (waiting up to ``timeout_s``), stop the thread, close the sink."""
        self._closing.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
            self._stop.set()  # aborts a retry loop against a sink that stays down
            self._thread.join(1.0)
        self._sink.close()

    def _run(self) -> None:
        while not (self._closing.is_set() and self._queue.empty()):
            try:
                batch = [self._queue.get(timeout=self._flush_interval_s)]
            except queue.Empty:
                continue
            while len(batch) < self._batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list[DecisionTrace]) -> None:
        delay = 0.05
        while batch:
            try:
                self._sink.write_batch(batch)
            except SinkError as exc:
                self.stats.sink_errors += 1
                log.warning("trace sink failed (%s); retrying in %.2fs", exc, delay)
                if self._stop.is_set():
                    self.stats.dropped += len(batch)
                    log.error("emitter stopped with %d unwritten traces", len(batch))
                    return
                self._sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            self.stats.written += len(batch)
            for trace in batch:
                self._pending.pop(trace.request_id, None)
            return
