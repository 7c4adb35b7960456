"""The emitter: ``emit()`` hands a record to storage without waiting for it.

``emit`` serializes the record (orjson, a few µs), appends it to the durable spool (a ``memcpy``
into a mapped segment: it survives ``kill -9`` of the process) and returns; the batcher thread of
:mod:`ingest.pipeline.batcher` reads the spool in order and writes batches to the store. A trace
stays visible through :meth:`TraceEmitter.pending` until it is stored, so a client that asks for
its trace right after the response finds it (:mod:`ingest.pipeline.pending`). A verdict (a feedback
record) stays visible the same way through :meth:`TraceEmitter.pending_verdicts`, those the spool
held from before this start included (:mod:`ingest.pipeline.pending_verdicts`).

Records fan out to the store and to any exporters, each a :class:`~ingest.record_sink.RecordSink`
on a thread of its own: the store is durable (the spool is its queue, acknowledged only by it),
exporters are best-effort (:mod:`ingest.pipeline.export_queue`: a bounded queue each, fed as the
records are spooled, dropping and counting when full). Neither holds back the other.

:meth:`TraceEmitter.health` says what ``/health`` turns 503 for (:mod:`ingest.pipeline.storage_health`):
a spool that takes no record (they are held in memory only, or refused by the relay), or a store
whose writes have failed for longer than ``sink_failing_after_s``.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from ingest.codec.encoder import Encoder
from ingest.kinds import KINDS, Kind, kind_of
from ingest.pipeline.backlog import Backlog
from ingest.pipeline.batcher import Batcher
from ingest.pipeline.export_queue import ExportQueue
from ingest.pipeline.pending import PendingTraces
from ingest.pipeline.pending_verdicts import PendingVerdicts, request_id_of
from ingest.pipeline.quarantine import Quarantine
from ingest.pipeline.stats import STORE, PipelineStats, SinkStats
from ingest.pipeline.storage_health import StorageHealth, TimedSink
from ingest.record_sink import RecordSink
from ingest.spool.durable_spool import DurableSpool
from schemas.config.storage import StorageSettings
from schemas.feedback import Feedback
from schemas.records import QuarantinedRecord
from schemas.trace import DecisionTrace

__all__ = ["TraceEmitter"]

log = logging.getLogger(__name__)
_TRACES = (Kind.TRACE, Kind.TRACE_UNCHECKED)


def _id_in(payload: bytes, field: str) -> str | None:
    try:
        value = orjson.loads(payload).get(field)
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _filed_under(kind: Kind) -> str:
    """The field a quarantined record of ``kind`` is filed under (its ``request_id``).

    The request's id for the records of a request (a trace, a verdict: a later verdict is found
    beside its request's trace and first verdict), else the record's own id.
    """
    info = KINDS[kind]
    return "request_id" if "request_id" in info.model.model_fields else info.id_field


class TraceEmitter:
    """Accepts records from any thread; stores them through one sink and sends them to any exporters.

    Args:
        sink: The store, the durable sink (its counters are named ``store``); only the batcher
            threads call it.
        settings: Queue, batch, spool, sampling and fsync settings (an exporter's queue holds
            ``queue_size`` records and writes ``batch_size`` at most).
        exporters: Best-effort sinks by name, each on its own thread (see
            :mod:`ingest.pipeline.export_queue`); they get every record spooled from now on.
        spool_dir: The spool folder; None keeps records in memory only (no durability).
        quarantine: Where bad records are filed; default: no file.
        clock: UTC wall clock (quarantine timestamps).
        sleep: Injected for the store's retry backoff.
        sink_failing_after_s: How long the store's writes may keep failing (retried all the while)
            before :meth:`health` reports it; shorter runs (a store restarting) are not a problem.
        monotonic: The clock that times those failures.

    Raises:
        ValueError: An exporter is named ``store`` or nothing.
    """

    def __init__(
        self,
        sink: RecordSink,
        settings: StorageSettings | None = None,
        *,
        exporters: Mapping[str, RecordSink] | None = None,
        spool_dir: str | Path | None = None,
        quarantine: Quarantine | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] | None = None,
        sink_failing_after_s: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        st = settings or StorageSettings()
        self.settings = st
        self.stats = PipelineStats()
        self.stats.sinks[STORE] = SinkStats()
        for name in exporters or {}:
            if not name or name == STORE:
                raise ValueError(f"an exporter cannot be named {name!r}")
            self.stats.sinks[name] = SinkStats()
        self.exporters = [
            ExportQueue(name, exporter, self.stats.sinks[name], capacity=st.queue_size, batch_size=st.batch_size,
                        flush_interval_s=st.flush_interval_ms / 1000)
            for name, exporter in (exporters or {}).items()
        ]
        self._offers = tuple(export.offer for export in self.exporters)  # under the backlog lock, after the spool
        self.quarantine = quarantine or Quarantine(None, clock)
        self._encoder = Encoder(st.detail_share, clock=clock)
        self._pending = PendingTraces(st.pending_traces)  # traces not stored yet, for read-your-writes
        sp = st.spool

        def open_spool() -> DurableSpool:
            assert spool_dir is not None
            return DurableSpool(
                spool_dir, segment_bytes=sp.segment_bytes, max_bytes=sp.max_bytes, fsync=sp.fsync,
                on_damage=self._on_damage, mirror_records=st.queue_size,
            )

        self.backlog = Backlog(
            open_spool if spool_dir is not None else None, self.stats, queue_size=st.queue_size,
            policy=sp.full_policy,
        )
        # Verdicts not stored yet (one waiting counts as given), those the spool holds from before found now
        self._verdicts = PendingVerdicts.found_in(self.backlog.spool)
        # The backlog's lock (Backlog.lock), bound once: emit() takes it for every record. Under it
        # go the encoder (not thread-safe) and the pending traces (kept in sequence order).
        self._backlog_lock = self.backlog.lock
        self._sink = TimedSink(sink, monotonic)
        self._health = StorageHealth(self.backlog, self._sink, self.stats.sinks[STORE], self.backlog_size, monotonic,
                                     sink_failing_after_s)
        self.batcher = Batcher(
            self.backlog, self._sink, self.stats, sink_stats=self.stats.sinks[STORE],
            reject=functools.partial(self.reject, source="sink", may_block=False), delivered=self.delivered,
            batch_size=st.batch_size, flush_interval_s=st.flush_interval_ms / 1000,
            fsync_interval_s=sp.fsync_interval_ms / 1000 if sp.fsync == "interval" else None, sleep=sleep,
        )

    def start(self) -> TraceEmitter:
        """Start the batcher's threads; returns self.

        Also lowers Python's thread switch interval to ``gil_switch_interval_ms`` (a setting of
        the whole process; never raised, and left alone when the setting is null). The batcher's
        threads spend most of their time in C without the GIL, but between those calls each needs
        it for a moment; at the default 5 ms each such moment waits behind the request threads
        while the other core idles. Measured through ``bench.ingest.pipeline_rate`` (300,000
        traces, three rounds in one process): 38-42k traces/s and an ``emit()`` p99 of 29-32 µs at
        5 ms; 42-46k and 31-40 µs at 1 ms; 44-47k and 34-38 µs at 0.5 ms.
        """
        wanted = self.settings.gil_switch_interval_ms
        if wanted is not None and wanted / 1000 < sys.getswitchinterval():
            sys.setswitchinterval(wanted / 1000)
            log.info("Python's thread switch interval lowered to %.2f ms for the trace pipeline", wanted)
        self.quarantine.prune()  # files older than storage.retention_days (none without it)
        self.batcher.start()
        for export in self.exporters:
            export.start()
        return self

    def emit(self, record: BaseModel) -> bool:
        """Queue ``record`` (a trace, snapshot, probe result, event or feedback) for storage.

        Returns:
            True when queued; False when it was quarantined instead (e.g. oversized).

        Raises:
            TypeError: ``record`` is not a model the pipeline stores (a programming error).
        """
        return self._emit(record, may_block=True)

    def _emit(self, record: BaseModel, *, may_block: bool) -> bool:
        """``emit``; the batcher's own records pass ``may_block=False`` (it must never wait for itself)."""
        trace = record if isinstance(record, DecisionTrace) else None
        return self._queue(lambda: self._encoder.encode(record), kind_of(record), getattr(record, "request_id", None),
                           trace, may_block=may_block)

    def emit_plain(self, values: dict[str, Any]) -> bool:
        """Queue a trace given as plain values (``TraceRecorder.plain``), unvalidated; durable once this returns.

        The gateway's request path: no model is built here. The record goes to the spool as
        ``TRACE_UNCHECKED``, and the sink that stores it validates it first (a trace that is not
        valid is quarantined there, with pydantic's reason). Read-your-writes lookups validate it
        when they ask (:meth:`pending`). Returns False when it was quarantined at once (oversized).
        """
        return self._queue(lambda: self._encoder.plain_trace(values), Kind.TRACE, values["request_id"], values,
                           may_block=True)

    def _queue(self, encode: Callable[[], list[tuple[Kind, bytes]]], own: Kind, request_id: str | None,
               trace: DecisionTrace | dict[str, Any] | None, *, may_block: bool) -> bool:
        """Append what ``encode`` gives, under the lock (the encoder is not thread-safe); quarantine oversized records.

        ``own`` is the kind of the record itself (the last payload; snapshots may come first);
        ``trace`` is kept for read-your-writes. True unless the record itself was quarantined.
        """
        limit = self.settings.spool.max_record_bytes
        bad: list[tuple[Kind, bytes]] = []
        offers, pending = self._offers, self._pending
        with self._backlog_lock:
            for kind, payload in encode():
                if len(payload) > limit:
                    bad.append((Kind.TRACE if kind is Kind.TRACE_UNCHECKED else kind, payload))
                    continue
                seq = self.backlog.append(kind, payload, may_block=may_block)
                self.stats.queued += 1
                for offer in offers:
                    offer(kind, payload)
                if trace is not None and kind in _TRACES and pending.cap:
                    assert request_id is not None
                    pending.add(seq, request_id, trace)
                elif kind is Kind.FEEDBACK and request_id is not None:
                    self._verdicts.add(seq, request_id, payload)
        if self.batcher.urgent or self.backlog.pending() >= self.batcher.piece:
            self.batcher.wake()
        for kind, payload in bad:
            self.reject(kind, payload, f"record of {len(payload)} bytes exceeds the limit of {limit} "
                        "(storage.spool.max_record_bytes)", source="emit", request_id=request_id, may_block=may_block)
        return all(kind is not own for kind, _ in bad)

    def emit_encoded(self, records: list[tuple[Kind, bytes]], *, durable: bool = False) -> int:
        """Queue records another process already encoded (the relay from a gateway); may block like ``emit``.

        Args:
            records: ``(kind, payload)`` as the other process encoded them.
            durable: Keep them only in the spool: when it cannot take one, raise rather than hold
                it in memory (the relay: its caller keeps its own copy until told they are on disk).

        Returns:
            How many were queued (the rest, oversized, were quarantined).

        Raises:
            SpoolUnavailable: ``durable`` and the spool could not take a record. Those before it
                are spooled (and will be stored: a re-delivery of them is a duplicate, by id), it
                and those after it are not kept, and none was quarantined.
        """
        limit, queued = self.settings.spool.max_record_bytes, 0
        with self._backlog_lock:
            try:
                for kind, payload in records:
                    if len(payload) <= limit:
                        seq = self.backlog.append(kind, payload, may_block=True, durable=durable)
                        queued += 1
                        if kind is Kind.FEEDBACK and (request_id := request_id_of(payload)) is not None:
                            self._verdicts.add(seq, request_id, payload)
                        for offer in self._offers:
                            offer(kind, payload)
            finally:
                self.stats.queued += queued
        self.batcher.wake()
        for kind, payload in records:
            if len(payload) > limit:
                self.reject(kind, payload, f"record of {len(payload)} bytes exceeds the limit of {limit} "
                            "(storage.spool.max_record_bytes)", source="relay")
        return queued

    def reject(
        self, kind: Kind, payload: bytes | None, reason: str, *, source: str,
        request_id: str | None = None, line: int | None = None, may_block: bool = True,
    ) -> QuarantinedRecord:
        """Quarantine one record: file it, count it, and store the quarantine record.

        ``may_block=False`` from the batcher's threads: storing the record must not wait for them.
        """
        if request_id is None and payload is not None:
            request_id = _id_in(payload, _filed_under(kind))
        rec = self.quarantine.record(
            kind=KINDS[kind].name, source=source, reason=reason, raw=payload, model=KINDS[kind].model,
            request_id=request_id, line=line, max_raw=min(64 * 1024, self.settings.spool.max_record_bytes // 2),
        )
        self.stats.quarantined += 1
        if kind is not Kind.QUARANTINE:
            self._emit(rec, may_block=may_block)
        return rec

    def _on_damage(self, problem: str, lost: int) -> None:
        self.stats.corrupted += lost
        reason = f"spool damaged: {problem}; {lost} records unreadable"
        self.stats.quarantined += 1
        self._emit(self.quarantine.record(kind="unknown", source="spool", reason=reason, raw=None), may_block=False)

    def delivered(self, frames: list[tuple[int, int, bytes]]) -> None:
        """Forget the pending traces and verdicts up to the newest delivered frame (batcher thread).

        Everything older is stored by now, or was dropped or found damaged in the spool: either
        way it is no longer pending (they are in seq order, the order of ``emit``).
        """
        if not frames:
            return
        newest = max(frame[0] for frame in frames)
        with self._backlog_lock:
            self._pending.stored(newest)
            self._verdicts.stored(newest)

    def pending(self, request_id: str) -> DecisionTrace | None:
        """Return a trace that was emitted but is not stored yet (None too for plain values that do not validate)."""
        return self._pending.get(request_id)

    def pending_verdicts(self, request_id: str) -> list[Feedback] | None:
        """Return the verdicts on ``request_id`` queued and not stored yet (spooled here since, or before, this start).

        None: cannot tell, only while more than ``PENDING_VERDICTS`` wait
        (:mod:`ingest.pipeline.pending_verdicts`). Taken from memory: no write is forced.
        """
        return self._verdicts.verdicts(request_id)

    @property
    def replayed_verdicts(self) -> tuple[str, ...]:
        """The request ids of the verdicts the spool held at start-up, from before it (replayed to the store)."""
        return self._verdicts.found

    def backlog_size(self) -> int:
        """Return how many records are queued but not yet stored."""
        return self.backlog.pending() + self.batcher.in_hand

    def storage_state(self) -> dict[str, Any]:
        """What ``/health`` says of storage: the spool's state, the records waiting, how many only in memory."""
        return self._health.state()

    def health(self) -> str | None:
        """Why storage is degraded (``/health`` answers 503 with it), or None (:mod:`ingest.pipeline.storage_health`).

        A spool that takes no record, or store writes failing for ``sink_failing_after_s`` or longer.
        """
        return self._health.problem()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every record queued so far is stored (or quarantined) by the store; False on timeout.

        Exporters are not waited for (:meth:`flush_exporters`): a slow one must not slow the
        callers that wait for the store (the relay's answer, read-your-writes).
        """
        return self.batcher.wait_until(self.stats.queued, timeout_s)

    def flush_exporters(self, timeout_s: float = 30.0) -> bool:
        """Wait until every exporter delivered, rejected or dropped every record offered so far; False on timeout."""
        deadline = time.monotonic() + timeout_s
        return all([export.flush(max(0.0, deadline - time.monotonic())) for export in self.exporters])

    def close(self, timeout_s: float = 10.0) -> None:
        """Store and export everything queued (waiting up to ``timeout_s``), stop the threads, close the sinks.

        Records the store has not taken stay in the spool and are replayed to it at the next
        start; those an exporter has not sent are dropped (counted).
        """
        deadline = time.monotonic() + timeout_s
        self.batcher.stop(timeout_s)
        for export in self.exporters:  # they have been sending all along: this is what is left
            export.stop(max(0.0, deadline - time.monotonic()))
        self.backlog.close()
