"""An exporter beside the store: its own bounded queue, thread, retries and counters; best-effort.

The store is the pipeline's one durable sink: it reads the spool and the spool forgets only what
it took. An exporter (an OpenTelemetry exporter, say) is fed apart from it, the way a tracing
SDK's batch processor is: ``emit()`` offers each record it spooled to every exporter's queue (an
append to two lists), and the exporter's thread sends them on in batches. So:

- an exporter that is down or slow never delays the store nor costs it a record: its queue
  fills up to ``capacity`` and the newest records are dropped and counted (``drop_newest``);
- the store never holds back an exporter: records reach the exporter while the store is down;
- a batch that fails with :class:`~ingest.errors.SinkUnavailable` is retried with backoff
  (50 ms doubling to 5 s) for ``retry_for_s``, then dropped and counted; any other failure is
  a fault in the exporter, and the batch is dropped at once;
- delivery is at most once: what an exporter had not sent at a crash or at stop is gone
  (counted at stop); the spool replays records to the store only.

Traces the gateway emitted unvalidated (``Kind.TRACE_UNCHECKED``: built by its own recorder) reach
an exporter as they are. Validating them is the store's job (it quarantines what does not hold);
doing it again here cost an exporter a third of its CPU (``python -m bench gateway --otel``). An
exporter reads the fields it needs and rejects, counted, a record it cannot turn into its form.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ingest.errors import SinkUnavailable
from ingest.pipeline.priority import lower_priority
from ingest.pipeline.stats import SinkStats
from ingest.record_sink import RecordBatch, RecordSink, WriteResult, batch_of

__all__ = ["ExportQueue"]

log = logging.getLogger(__name__)


class ExportQueue:
    """Sends the records offered to it on to one exporter, on a thread of its own.

    Args:
        name: The exporter's name (the ``sink`` label of its counters).
        sink: The exporter.
        stats: Its counters (delivered, rejected, dropped, failed, retried).
        capacity: Records waiting at most; past it, new records are dropped (counted).
        batch_size: Records per write at most.
        flush_interval_s: Longest wait for a batch to fill.
        retry_for_s: How long one batch is retried while the exporter is unavailable.
        clock: Monotonic seconds (the retry deadline).
    """

    def __init__(
        self,
        name: str,
        sink: RecordSink,
        stats: SinkStats,
        *,
        capacity: int,
        batch_size: int,
        flush_interval_s: float,
        retry_for_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.sink = sink
        self.stats = stats
        self.capacity = capacity
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.retry_for_s = retry_for_s
        self._clock = clock
        # Two flat lists, not a list of tuples: offer() runs inside emit() and makes no object
        # the garbage collector tracks (see ingest.spool.mirror).
        self._kinds: list[int] = []
        self._payloads: list[bytes] = []
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self.offered = 0
        self._finished = 0  # delivered, rejected or dropped
        self.in_hand = 0
        self._urgent = 0
        self._last_complaint = -1e9
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._abort = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"trace-export-{name}", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def offer(self, kind: int, payload: bytes) -> None:
        """Queue one record, or drop it (counted) when the queue is full; never waits."""
        with self._lock:
            self.offered += 1
            held = len(self._payloads)
            if held < self.capacity:
                self._kinds.append(kind)
                self._payloads.append(payload)
                if held + 1 >= self.batch_size and not self._wake.is_set():
                    self._wake.set()
                return
            self.stats.dropped += 1
            self._finished += 1
            now = self._clock()
            complain = now - self._last_complaint >= 5.0  # one line per 5 s however long the overflow lasts
            if complain:
                self._last_complaint = now
        if complain:
            log.error("exporter %s: %d records wait; dropping new ones (%d so far)", self.name, held,
                      self.stats.dropped)

    @property
    def queued(self) -> int:
        """Records offered and not yet delivered, rejected or dropped."""
        return len(self._payloads) + self.in_hand

    # -- the thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        lower_priority()
        while not self._abort.is_set():
            if not self._urgent and not self._closing.is_set() and len(self._payloads) < self.batch_size:
                self._wake.wait(self.flush_interval_s)
                self._wake.clear()
            kinds, payloads = self._take()
            if payloads:
                self._send(kinds, payloads)
                if not self._payloads:
                    self._idle()
            elif self._closing.is_set():
                return

    def _idle(self) -> None:
        """Nothing waits (after a write): the exporter's upkeep, as the store gets it."""
        try:
            self.sink.idle()
        except Exception as exc:  # noqa: BLE001  (upkeep only: sending goes on without it)
            log.warning("exporter %s upkeep failed (%s: %s)", self.name, type(exc).__name__, exc)

    def _take(self) -> tuple[list[int], list[bytes]]:
        with self._lock:
            n = self.batch_size
            if len(self._payloads) <= n:
                kinds, payloads = self._kinds, self._payloads
                self._kinds, self._payloads = [], []
            else:
                kinds, payloads = self._kinds[:n], self._payloads[:n]
                del self._kinds[:n], self._payloads[:n]
            self.in_hand = len(payloads)
        return kinds, payloads

    def _send(self, kinds: list[int], payloads: list[bytes]) -> None:
        batch = batch_of(zip(kinds, payloads, strict=True))
        rejected = delivered = dropped = 0
        if len(batch):
            result = self._write(batch)
            if result is None:
                dropped = len(batch)
            else:
                rejected += len(result.rejected)
                delivered = max(0, len(batch) - len(result.rejected))
        with self._lock:
            self.stats.delivered += delivered
            self.stats.rejected += rejected
            self.stats.dropped += dropped
            self._finished += len(payloads)
            self.in_hand = 0
            self._done.notify_all()

    def _write(self, batch: RecordBatch) -> WriteResult | None:
        """Write ``batch``, retrying while the exporter is unavailable; None when it was given up."""
        delay, deadline = 0.05, self._clock() + self.retry_for_s
        try:
            prepared = self.sink.prepare(batch)
            while True:
                try:
                    return self.sink.write(prepared)
                except SinkUnavailable as exc:
                    self.stats.failed += 1
                    if self._abort.is_set() or self._clock() + delay > deadline:
                        log.error("exporter %s unavailable (%s); dropped %d records (%s)", self.name, exc,
                                  len(batch), "stopping" if self._abort.is_set() else
                                  f"retried for {self.retry_for_s:g}s")
                        return None
                    log.warning("exporter %s unavailable (%s); retrying in %.2fs", self.name, exc, delay)
                    self._abort.wait(delay)
                    self.stats.retried += 1
                    delay = min(delay * 2, 5.0)
        except Exception as exc:  # noqa: BLE001  (a fault in the exporter: retrying it would not help)
            self.stats.failed += 1
            log.error("exporter %s failed (%s: %s); dropped %d records", self.name, type(exc).__name__, exc,
                      len(batch))
            return None

    # -- control --------------------------------------------------------------------------------
    def flush(self, timeout_s: float) -> bool:
        """Wait until every record offered so far is delivered, rejected or dropped; False on timeout."""
        with self._lock:
            target = self.offered
            self._urgent += 1
        self._wake.set()
        try:
            with self._done:
                return self._done.wait_for(lambda: self._finished >= target, timeout_s)
        finally:
            with self._lock:
                self._urgent -= 1

    def stop(self, timeout_s: float) -> None:
        """Send what waits (up to ``timeout_s``), then drop the rest (counted) and close the exporter."""
        self._closing.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self._abort.set()  # ends a retry, and the loop
        if self._thread.is_alive():
            self._thread.join(5.0)
        with self._lock:
            left = len(self._payloads)
            self._kinds, self._payloads = [], []
            self.stats.dropped += left
            self._finished += left
            self._done.notify_all()
        if left:
            log.error("exporter %s stopped with %d records not sent: dropped", self.name, left)
        if self._thread.is_alive():
            log.error("exporter %s is still writing; left open", self.name)
            return
        try:
            self.sink.close()
        except Exception as exc:  # noqa: BLE001  (closing one exporter must not stop the rest)
            log.error("exporter %s failed to close (%s: %s)", self.name, type(exc).__name__, exc)
