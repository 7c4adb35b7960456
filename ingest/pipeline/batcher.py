"""The batcher: drains the backlog into the sink, in order, with retries, on two threads.

The *preparer* takes pieces of at most :data:`PIECE` frames (waiting up to ``flush_interval``
for one to fill) and has the sink parse them (CPU, outside the GIL). The *writer* stores in one
write all the pieces that are ready when it gets to them, up to ``batch_size`` records (a group
commit: while the sink is idle a piece goes at once, under load the writes grow and each record
costs less), retrying a sink that is down (``SinkUnavailable``, or any ``SinkError``: the sink's
own failure) with exponential backoff (50 ms up to 5 s) for as long as it takes; it quarantines
what the sink refused one by one, and only then acknowledges the frames so the spool can forget
them. Parsing overlaps writing; order is kept. When nothing waits, the writer gives the sink a
moment for upkeep (``RecordSink.idle``: DuckDB checkpoints then).

The calls to the sink, and what a write that fails on anything but a ``SinkError`` (a fault of
the records or of the sink's code) comes to, are :mod:`ingest.pipeline.sink_calls`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ingest.kinds import Kind
from ingest.pipeline.backlog import Backlog, Taken
from ingest.pipeline.origins import NONE_SETTLED, Origins
from ingest.pipeline.priority import lower_priority
from ingest.pipeline.sink_calls import FAULT_TRIES, SinkCalls
from ingest.pipeline.stats import PipelineStats, SinkStats
from ingest.record_sink import PreparedBatch, RecordSink, WriteResult
from ingest.spool.segment import Frame

__all__ = ["FAULT_TRIES", "Batcher", "Delivered", "Reject", "lower_priority"]

log = logging.getLogger(__name__)
_END = None
# Parsing costs the same per record at any batch size, so it starts once this many records wait
# (or the flush interval passed); the insert, cheaper per record in large batches, gets the
# pieces merged.
PIECE = 8192

# A piece of the backlog and its preparation (None: the sink's prepare raised; it is written in parts).
_Piece = tuple[Taken, PreparedBatch | None]


class Reject(Protocol):
    """Quarantines a record the sink refused."""

    def __call__(self, kind: Kind, payload: bytes, reason: str, /, **origin: str | int) -> object:
        """``origin``: its ``source`` and ``line`` when known (:mod:`ingest.pipeline.origins`), else nothing."""


Delivered = Callable[[list[Frame]], None]  # the frames of one write, stored and acknowledged


class Batcher:
    """Drains a backlog into a sink on background threads; it knows nothing of who emits into it.

    Args:
        backlog: Where the frames wait: read by the preparer, acknowledged by the writer.
        sink: Where batches go.
        stats: Counters the writer updates (stored, replayed, sink errors, dropped).
        sink_stats: The sink's own counters (delivered, rejected, failed, retried, dropped).
        reject: Quarantines a record the sink refused. Called on the writer thread, so it must
            not wait for the batcher (the emitter binds ``may_block=False``).
        delivered: Told the frames of each write after the backlog forgot them (the emitter drops
            its pending traces up to them). Called on the writer thread.
        batch_size: Records per sink call at most.
        flush_interval_s: Longest wait for a batch to fill.
        fsync_interval_s: Flush the spool this often (None: never from here).
        sleep: Backoff sleep (injected by tests); default waits on the abort event.

    Attributes:
        origins: Where the traces taken from outside came from (filed by the intake): one the sink
            refuses is quarantined under its origin (``source``, ``line``) when one is held.
    """

    def __init__(
        self,
        backlog: Backlog,
        sink: RecordSink,
        stats: PipelineStats,
        *,
        sink_stats: SinkStats,
        reject: Reject,
        delivered: Delivered,
        batch_size: int,
        flush_interval_s: float,
        fsync_interval_s: float | None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._backlog = backlog
        self.origins = Origins()
        self.sink = sink
        self._stats = stats
        self._sink_stats = sink_stats
        self._reject = reject
        self._delivered = delivered
        self.batch_size = batch_size
        self.piece = min(batch_size, PIECE)
        self.flush_interval_s = flush_interval_s
        self.fsync_interval_s = fsync_interval_s
        self.in_hand = 0
        self._hand_lock = threading.Lock()
        # Pieces parsed ahead of the writer: about one write's worth.
        self._ready: queue.Queue[_Piece | None] = queue.Queue(
            maxsize=max(1, batch_size // self.piece))
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._abort = threading.Event()
        self._calls = SinkCalls(sink, stats, sink_stats, abort=self._abort, sleep=sleep or self._abort.wait)
        self._done = threading.Condition()
        self._finished = 0
        self._urgent = 0  # callers waiting in wait_until: write what there is, do not wait to fill
        self._last_fsync = time.monotonic()
        self._preparer = threading.Thread(target=self._prepare_loop, name="trace-preparer", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name="trace-writer", daemon=True)
        self._keeper = threading.Thread(target=self._keep_loop, name="spool-keeper", daemon=True)

    def start(self) -> None:
        """Start the threads."""
        self._preparer.start()
        self._writer.start()
        self._keeper.start()

    @property
    def urgent(self) -> bool:
        """True while someone waits in :meth:`wait_until`: every new record should be sent at once."""
        return self._urgent > 0

    def wake(self) -> None:
        """Tell the preparer a full piece is waiting (cheap when it already knows)."""
        if not self._wake.is_set():
            self._wake.set()

    # -- preparer -------------------------------------------------------------------------------
    def _prepare_loop(self) -> None:
        lower_priority()
        backlog = self._backlog
        try:
            while not self._abort.is_set():
                taken = self._take(self.piece)
                deadline = time.monotonic() + self.flush_interval_s
                while len(taken.frames) < self.piece and not self._closing.is_set() and not self._urgent:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._wake.wait(min(left, 0.05))
                    self._wake.clear()
                    taken = taken + self._take(self.piece - len(taken.frames))
                if not taken.frames:
                    if self._closing.is_set() and backlog.pending() == 0:
                        break
                    self._wake.wait(0.05)  # during a flush nothing else paces this loop
                    self._wake.clear()
                    continue
                self._put((taken, self._calls.prepare(taken.frames)))
        finally:
            self._put(_END)

    def _take(self, n: int) -> Taken:
        taken = self._backlog.take(n)
        self._hand(len(taken.frames))  # counted as pending from the moment they leave the spool
        return taken

    def _hand(self, delta: int) -> None:
        with self._hand_lock:
            self.in_hand += delta

    def _put(self, item: _Piece | None) -> None:
        while True:
            try:
                self._ready.put(item, timeout=0.1)
                return
            except queue.Full:
                if self._abort.is_set() and item is not _END:
                    assert item is not None
                    self._give_up(item[0])
                    return

    def _keep_loop(self) -> None:
        """Prefault spool pages ahead of the writer and apply the ``interval`` fsync policy."""
        lower_priority()
        backlog = self._backlog
        while not self._abort.wait(0.02):
            due = self.fsync_interval_s is not None and time.monotonic() - self._last_fsync >= self.fsync_interval_s
            if due:
                self._last_fsync = time.monotonic()
            backlog.keep(flush=due)
            if self._closing.is_set() and not self._preparer.is_alive():
                return

    # -- writer ---------------------------------------------------------------------------------
    def _write_loop(self) -> None:
        lower_priority()
        carry: list[_Piece | None] = []  # a piece (or the end) already off the queue
        while group := self._next_group(carry):
            taken = group[0][0]
            for more, _ in group[1:]:
                taken = taken + more
            result = self._calls.store([prepared for _, prepared in group], taken.frames)
            if result is None:
                self._give_up(taken)
                item = carry.pop() if carry else self._ready.get()
                while item is not _END:
                    self._give_up(item[0])
                    item = self._ready.get()
                return
            self._account(result, taken)

    def _next_group(self, carry: list[_Piece | None]) -> list[_Piece]:
        """Return the pieces of the next write ([] at the end): the first one to come, and those ready behind it.

        A group holds ``batch_size`` records at most; a piece that does not fit, or the end, is
        left in ``carry`` for the next call.
        """
        item = carry.pop() if carry else self._get()
        group: list[_Piece] = []
        size = 0
        while item is not _END:
            group.append(item)
            size += len(item[0].frames)
            try:
                item = self._ready.get_nowait()
            except queue.Empty:
                return group
            if item is not _END and size + len(item[0].frames) > self.batch_size:
                break
        carry.append(item)
        return group

    def _get(self) -> _Piece | None:
        """Return the next prepared piece; when there is none and nothing else waits, let the sink do its upkeep."""
        try:
            return self._ready.get_nowait()
        except queue.Empty:
            pass
        if self.in_hand == 0 and self._backlog.pending() == 0:
            try:
                self.sink.idle()
            except Exception as exc:  # noqa: BLE001  (upkeep only: storing goes on without it)
                log.warning("trace sink upkeep failed (%s: %s)", type(exc).__name__, exc)
        return self._ready.get()

    def _account(self, result: WriteResult, taken: Taken) -> None:
        stats = self._stats
        replay_below = self._backlog.replay_below
        for kind, (stored, dup) in result.by_kind.items():
            stats.count_stored(kind, stored, dup)
        old = 0 if taken.frames[0][0] >= replay_below else sum(1 for f in taken.frames if f[0] < replay_below)
        fresh = len(taken.frames) - old
        stats.replayed += old
        self._sink_stats.rejected += len(result.rejected)
        self._sink_stats.delivered += max(0, len(taken.frames) - len(result.rejected))
        settled = self.origins.settle(taken.frames) if self.origins else NONE_SETTLED  # empty: no work
        for item in result.rejected:  # an intake line's trace as from its line, like the intake's own refusals
            self._reject(item.kind, item.payload, item.reason, **settled.of(item.payload))
        self._backlog.ack(taken)
        self._delivered(taken.frames)
        self._hand(-len(taken.frames))
        with self._done:
            self._finished += fresh
            self._done.notify_all()

    def _give_up(self, taken: Taken) -> None:
        self._hand(-len(taken.frames))
        if taken.from_memory:
            self._stats.dropped += taken.from_memory
            self._sink_stats.dropped += taken.from_memory
            log.error("trace pipeline stopped with %d records held in memory only: lost", taken.from_memory)
        kept = len(taken.frames) - taken.from_memory
        if kept:
            log.error("trace pipeline stopped with %d undelivered records; they stay in the spool", kept)

    # -- control --------------------------------------------------------------------------------
    def wait_until(self, target: int, timeout_s: float) -> bool:
        """Wait until ``target`` records are finished (stored, duplicates, refused or dropped).

        While anyone waits here the preparer sends what it has instead of waiting for a full batch.
        """
        stats = self._stats
        with self._done:
            self._urgent += 1
        self.wake()
        try:
            with self._done:
                return self._done.wait_for(
                    lambda: self._finished + stats.dropped + stats.corrupted >= target, timeout_s)
        finally:
            with self._done:
                self._urgent -= 1

    def stop(self, timeout_s: float) -> None:
        """Drain (waiting up to ``timeout_s``), stop both threads and close the sink."""
        self._closing.set()
        self._wake.set()
        deadline = time.monotonic() + timeout_s
        for thread in (self._preparer, self._writer):
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._abort.set()  # ends a retry loop against a sink that stays down
        for thread in (self._preparer, self._writer, self._keeper):
            if thread.is_alive():
                thread.join(5.0)
        self.sink.close()
