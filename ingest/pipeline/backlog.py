"""Records emitted but not yet stored: the durable spool, or memory while the spool is unusable.

``append`` applies the configured policy when the spool cannot take a record: ``block`` waits
until the batcher frees room, ``drop_oldest`` discards the oldest undelivered records and counts
them. If the spool folder cannot be written at all the records are held in a bounded memory queue
(same policy at its bound) and the spool is retried; every such event is logged and counted. A
caller that must not be told "kept" unless the record is on disk (the store's relay route: the
gateway then forgets its own copy) appends with ``durable=True`` and gets :class:`SpoolUnavailable`
instead of a place in memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ingest.errors import SpoolFull, SpoolUnavailable
from ingest.pipeline.stats import PipelineStats
from ingest.spool.durable_spool import DurableSpool
from ingest.spool.segment import Frame

__all__ = ["Backlog", "Taken"]

log = logging.getLogger(__name__)


@dataclass
class Taken:
    """Frames handed to the batcher.

    Attributes:
        frames: ``(seq, kind, payload)`` in sequence order.
        spool_last: Sequence number of the newest frame that came from the spool.
        from_memory: How many frames were held in memory only (lost if never delivered).
    """

    frames: list[Frame]
    spool_last: int | None
    from_memory: int = 0

    def __add__(self, more: Taken) -> Taken:
        """Extend this batch with ``more`` (in place; returns self)."""
        self.frames += more.frames
        if more.spool_last is not None:
            self.spool_last = more.spool_last
        self.from_memory += more.from_memory
        return self


class Backlog:
    """The spool plus its memory fallback.

    Args:
        open_spool: Opens the spool (raises SpoolUnavailable); None runs in memory only.
        stats: Counters to update.
        queue_size: Records the memory fallback holds at most.
        policy: ``block`` or ``drop_oldest``.
        retry_spool_s: How often an unusable spool is tried again.

    Attributes:
        lock: The append lock; the backlog makes it and is its only owner. Every caller of
            :meth:`append` holds it, so that sequence numbers, spool frames and what the caller
            files by sequence number (the emitter's pending traces) keep one order. Waiting for
            room (:attr:`room`, a condition on it) releases it, so that the batcher can still
            quarantine and acknowledge while an emitter waits.
        spool_problem: Why the configured spool took no record last time ("" while it does).
    """

    def __init__(
        self,
        open_spool: Callable[[], DurableSpool] | None,
        stats: PipelineStats,
        *,
        queue_size: int = 50_000,
        policy: str = "block",
        retry_spool_s: float = 5.0,
    ) -> None:
        self._open_spool = open_spool
        self.stats = stats
        self.queue_size = queue_size
        self.policy = policy
        self.retry_spool_s = retry_spool_s
        self.memory: deque[Frame] = deque()
        self.lock = threading.Lock()
        self.room = threading.Condition(self.lock)
        self.waiters = 0  # emitters waiting for room (changed under the lock)
        self.closing = False
        self.spool: DurableSpool | None = None
        self.spool_ok = False
        self.spool_problem = ""  # why the configured spool is not usable ("" while it is)
        self._seq_lock = threading.Lock()
        self._next_retry = 0.0
        self._last_complaint = 0.0
        self.next_seq = 0
        self._try_spool()

    def _try_spool(self) -> None:
        if self._open_spool is None:
            return
        try:
            spool = self._open_spool()
        except SpoolUnavailable as exc:
            self._complain(f"{exc}; holding records in memory (at most {self.queue_size})")
            self._next_retry = time.monotonic() + self.retry_spool_s
            self.spool_problem = str(exc)
            return
        with self._seq_lock:
            self.next_seq = max(self.next_seq, spool.next_seq)
            self.spool, self.spool_ok, self.spool_problem = spool, True, ""

    def _complain(self, message: str) -> None:
        self.stats.spool_errors += 1
        now = time.monotonic()
        if now - self._last_complaint >= 5.0:
            self._last_complaint = now
            log.error("trace spool: %s", message)

    @property
    def has_spool(self) -> bool:
        """True when a spool is configured (usable or not); False for a backlog in memory by design."""
        return self._open_spool is not None

    @property
    def spool_usable(self) -> bool:
        """True while the configured spool takes records (False: they go to memory, or are refused when durable)."""
        return self.spool is not None and self.spool_ok

    def append(self, kind: int, payload: bytes, *, may_block: bool = True, durable: bool = False) -> int:
        """Store one record; return its sequence number (the caller holds :attr:`lock`).

        Under the ``block`` policy this waits for room unless ``may_block`` is False (the batcher's
        own quarantine records: it must never wait for itself).

        Raises:
            SpoolUnavailable: ``durable`` and the configured spool cannot take the record now
                (unwritable, its disk full, or full with nothing to drop): it is not kept at all,
                not even in memory, and the caller says so to whoever handed it over. A backlog
                with no spool configured keeps it in memory as always.
        """
        seq = self._next()
        spool = self.spool
        if spool is not None and not self.spool_ok and time.monotonic() < self._next_retry:
            spool = None  # unwritable a moment ago: try again later, not on every record
        waited, full = False, ""
        while spool is not None and not self.closing:
            if waited:
                # Others appended while this call waited (waiting releases the lock): take a
                # number after theirs, so the spool's frames stay in sequence order.
                seq, waited = self._next(), False
            try:
                spool.append(seq, kind, payload)
            except SpoolUnavailable as exc:
                self._complain(f"{exc}; " + ("refusing records that must be durable" if durable
                                              else "holding records in memory"))
                self.spool_ok = False
                self._next_retry = time.monotonic() + self.retry_spool_s
                self.spool_problem = str(exc)
                break
            except SpoolFull as exc:
                self._complain(f"{exc} (policy {self.policy})")
                full = str(exc)
                if self.policy == "drop_oldest":
                    lost = spool.drop_oldest()
                    if lost is None:
                        break  # nothing older to drop: keep this record in memory
                    self.stats.dropped += lost
                    log.error("trace spool full: dropped %d undelivered records (drop_oldest)", lost)
                elif may_block:
                    self._wait_for_room()
                    waited = True
                else:
                    break
                continue
            self.spool_ok = True
            self.spool_problem = ""
            self.stats.spooled += 1
            return seq
        if durable and self.has_spool:
            raise SpoolUnavailable("the spool is closing" if self.closing else full or self.spool_problem
                                   or "the spool is not usable")
        self._hold_in_memory((seq, kind, payload), may_block)
        return seq

    def _next(self) -> int:
        with self._seq_lock:
            seq = self.next_seq
            self.next_seq += 1
        return seq

    def _wait_for_room(self) -> None:
        # The caller holds the lock: wait() releases it while waiting.
        self.waiters += 1
        try:
            self.room.wait(0.5)
        finally:
            self.waiters -= 1

    @property
    def blocked(self) -> bool:
        """True while some ``emit()`` waits for room."""
        return self.waiters > 0

    def _wake(self) -> None:
        if self.waiters:
            with self.room:
                self.room.notify_all()

    def _hold_in_memory(self, frame: Frame, may_block: bool) -> None:
        while len(self.memory) >= self.queue_size and not self.closing and may_block:
            if self.policy == "drop_oldest":
                self.memory.popleft()
                self.stats.dropped += 1
                self._complain("memory queue full: dropped the oldest record (drop_oldest)")
            else:
                self._complain("memory queue full: emit() waits (block)")
                self._wait_for_room()
        self.memory.append(frame)

    def take(self, n: int) -> Taken:
        """Remove up to ``n`` frames for the batcher, in sequence order across the spool and memory.

        Memory holds the records the spool could not take, so the two interleave: spool frames are
        read only up to the oldest record in memory, which goes next.
        """
        frames: list[Frame] = []
        spool, spool_last, from_memory = self.spool, None, 0
        if spool is None and self._open_spool is not None and time.monotonic() >= self._next_retry:
            self._try_spool()  # read from the next call on
        while len(frames) < n:
            try:
                head: int | None = self.memory[0][0]
            except IndexError:
                head = None
            got = spool.read(n - len(frames), below=head) if spool is not None else []
            if got:
                frames += got
                spool_last = got[-1][0]
                if head is None:
                    break  # nothing in memory: one read, as before (its byte limit holds)
            elif head is None:
                break
            else:
                try:
                    frames.append(self.memory.popleft())
                except IndexError:  # emptied meanwhile (drop_oldest on the emitting thread)
                    continue
                from_memory += 1
        if from_memory:
            self._wake()
        return Taken(frames, spool_last, from_memory)

    def ack(self, taken: Taken) -> None:
        """Forget delivered frames (whole spool segments are deleted) and wake blocked emitters."""
        if taken.spool_last is not None and self.spool is not None:
            self.spool.ack(taken.spool_last)
        self._wake()

    @property
    def replay_below(self) -> int:
        """Frames below this seq were found in the spool at start-up (0 while there is no spool)."""
        return self.spool.replay_below if self.spool is not None else 0

    def pending(self) -> int:
        """Return how many records wait for the batcher."""
        return (self.spool.pending() if self.spool is not None else 0) + len(self.memory)

    def keep(self, *, flush: bool) -> None:
        """The spool keeper's round (background thread): fault in the pages the next records go to, flush if asked.

        A disk error (``EIO`` from ``msync``, say) is counted and said, and the keeper goes on: a
        thread that died of it would silently stop every later flush.
        """
        spool = self.spool
        if spool is None:
            return
        try:
            spool.prefault()
            if flush:
                spool.flush()
        except OSError as exc:
            self._complain(f"keeping the spool on disk failed ({exc})")

    def close(self) -> None:
        """Release waiting emitters and close the spool."""
        self.closing = True
        with self.room:
            self.room.notify_all()
        if self.spool is not None:
            self.spool.close()
            self.spool = None
