"""What every sink provides, and what the pipeline hands it.

One interface, :class:`RecordSink`, for every place records go: the store (DuckDB,
Elasticsearch, or the relay to a store process) and any exporter beside it (an OpenTelemetry
exporter, say). A sink receives batches of already-serialized records (JSON objects, one per
record, grouped by kind) and stores them in one transaction or bulk request. Records it cannot
take one by one (a value Arrow cannot hold, a mapping conflict in Elasticsearch) come back in
:attr:`WriteResult.rejected`; a sink that cannot take the batch at all raises
:class:`ingest.errors.SinkUnavailable` and the batch is retried. What the pipeline does with
either depends on the sink's place in it (:class:`ingest.pipeline.emitter.TraceEmitter`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any, Protocol

from ingest.kinds import Kind
from schemas.trace import DecisionTrace

__all__ = ["SAMPLED", "PreparedBatch", "RecordBatch", "RecordSink", "Rejected", "WriteResult", "batch_of",
           "conflict_reason", "merge_prepared", "same_trace", "verdict_reason", "verdict_reason_parts"]


@dataclass
class RecordBatch:
    """Records to store, by kind, each kind in the order emitted."""

    payloads: dict[Kind, list[bytes]] = field(default_factory=dict)

    def add(self, kind: Kind, payload: bytes) -> None:
        """Append one record."""
        self.payloads.setdefault(kind, []).append(payload)

    def __len__(self) -> int:
        return sum(len(v) for v in self.payloads.values())


@dataclass(frozen=True)
class Rejected:
    """One record a sink refused, and why."""

    kind: Kind
    payload: bytes
    reason: str


@dataclass
class PreparedBatch:
    """A batch after the sink's CPU-bound preparation (parsing), ready for its I/O-bound write.

    The pipeline prepares pieces of the backlog while earlier ones are being written, and hands
    the sink all the pieces that are ready in one write (see :func:`merge_prepared`).

    Attributes:
        batch: The records.
        tables: Each kind's prepared items, the sink's own (Arrow tables, documents); lists, so
            that batches prepared apart merge by concatenation.
        rejected: Records the preparation refused.
    """

    batch: RecordBatch
    tables: dict[Kind, list[Any]] = field(default_factory=dict)
    rejected: list[Rejected] = field(default_factory=list)


def merge_prepared(parts: list[PreparedBatch]) -> PreparedBatch:
    """Return one prepared batch holding ``parts`` in order (the first part itself when alone)."""
    if len(parts) == 1:
        return parts[0]
    out = PreparedBatch(RecordBatch())
    for part in parts:
        for kind, payloads in part.batch.payloads.items():
            out.batch.payloads.setdefault(kind, []).extend(payloads)
        for kind, items in part.tables.items():
            out.tables.setdefault(kind, []).extend(items)
        out.rejected += part.rejected
    return out


@dataclass
class WriteResult:
    """What a sink did with a batch: stored, already there (same id), refused."""

    rejected: list[Rejected] = field(default_factory=list)
    by_kind: dict[Kind, list[int]] = field(default_factory=dict)  # kind -> [stored, duplicates]

    @property
    def stored(self) -> int:
        """Records stored, all kinds."""
        return sum(pair[0] for pair in self.by_kind.values())

    @property
    def duplicates(self) -> int:
        """Records already stored (same id), all kinds."""
        return sum(pair[1] for pair in self.by_kind.values())

    def count(self, kind: Kind, stored: int, duplicates: int) -> None:
        """Add to ``kind``'s counts."""
        pair = self.by_kind.setdefault(kind, [0, 0])
        pair[0] += stored
        pair[1] += duplicates


class RecordSink(Protocol):
    """A place records go: the store, or an exporter. Each sink is called from threads of its own.

    The pipeline calls ``prepare`` then ``write`` for every batch, in the order emitted, never
    two calls of one method at once (``prepare`` of the next batch may overlap ``write`` of this
    one); ``idle`` when nothing waits; ``close`` once, at the end.

    What a sink must do:

    - **write a batch**: take all of it or none of it. Return every record refused one by one
      (its own refusals and those of its ``prepare``) in :attr:`WriteResult.rejected` with a
      reason: *quarantine this record*. A record whose id is stored already is a duplicate
      (counted, not stored again) when it is the same record; a different trace under a stored
      ``request_id`` is refused with :func:`conflict_reason` (compare only when the id is found
      taken: the ordinary write must not pay for it). Feedback holds one verdict per request id:
      another verdict on a request holding one is refused with :func:`verdict_reason`. A refused
      record is never retried; the store's are quarantined, an exporter's only counted (the
      store has them). Everything else in the batch counts as taken.
    - **retry**: raise :class:`ingest.errors.SinkUnavailable` when the batch could not be taken
      now (unreachable, locked, timed out). Nothing of it counts as taken; the same batch comes
      again after a backoff (50 ms doubling to 5 s) on this sink's own thread, so a sink that is
      down holds back no other. The store is retried for as long as it takes; an exporter for
      ``retry_for_s`` (then the batch is dropped, counted).
    - any other exception is a fault in the sink or the data. The store's batch is tried three
      times with backoff, then written in halves down to single records; a record that still
      fails alone is quarantined with the exception as its reason and the rest are stored (one
      poison record never stops the store). An exporter's is dropped and counted (retrying a
      bug does not help it).
    - **flush** deferred work in ``idle`` (DuckDB checkpoints there); its failure is logged.
    - **close**: release resources; after the last ``write``.

    The store is the durable sink: the spool forgets a record only once the store took it or
    quarantined it, and after a restart it gets again what it had not. An exporter is
    best-effort: its records come from a bounded queue filled as they are emitted, so it may
    drop (counted) but never holds back or loses anything of the store's, and it gets no replay
    after a restart (at most once). Both see every record emitted while they run; traces
    emitted unvalidated (``Kind.TRACE_UNCHECKED``) reach a store as such (it validates them:
    :mod:`ingest.codec.unchecked`), and an exporter only as ``TRACE``, once validated: never
    one the store would quarantine as invalid.
    """

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        """Do the CPU-bound work for ``batch`` (no I/O; must not fail for a sink outage)."""
        ...

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Store a prepared batch or raise :class:`ingest.errors.SinkUnavailable` to have it retried."""
        ...

    def idle(self) -> None:
        """Nothing waits to be written: flush deferred work now (the sink's writer thread calls this)."""
        ...

    def close(self) -> None:
        """Release the sink's resources."""
        ...


def conflict_reason(request_id: str) -> str:
    """Why a trace is quarantined when a different trace is stored under its ``request_id``.

    A store counts a trace whose id it holds already as a duplicate only when it is the same
    trace (a re-delivery, a re-import); anything else under a taken id is this conflict.
    """
    return f"request_id {request_id!r} already stored with different content"


_VERDICT_REASON = "a verdict on request_id {} is stored already (one verdict per request: the first one counts)"


def verdict_reason(request_id: str) -> str:
    """Why a verdict is quarantined: its request holds another one (one verdict per request: the first counts).

    Every store says it in these words, and so does the DuckDB migration of an older file
    (``sql/verdicts.sql``, given the words around the id by :func:`verdict_reason_parts`).
    """
    return _VERDICT_REASON.format(repr(request_id))


def verdict_reason_parts() -> tuple[str, str]:
    """The reason's words before and after a request id written between single quotes (a SQL statement's join).

    ``head + rid + tail`` is :func:`verdict_reason` for every id Python quotes that way (one without a
    quote, a backslash or an unprintable character: every id the gateway makes or takes).
    """
    head, tail = _VERDICT_REASON.split("{}")
    return head + "'", "'" + tail


SAMPLED = ("candidates",)  # what a trace outside the detail sample (``detail`` false) holds less of


@cache
def scalar_defaults() -> dict[str, bool | int | float | str]:
    """The trace's top-level fields whose default is a scalar other than None, as stored (an enum as its value).

    A trace stored before such a field existed lacks it (NULL, or no key); the same trace delivered
    again holds the default: the two are one trace (:func:`same_trace`, :mod:`ingest.duckdb.conflicts`).
    """
    out: dict[str, bool | int | float | str] = {}
    for name, spec in DecisionTrace.model_fields.items():
        value = spec.default.value if isinstance(spec.default, Enum) else spec.default
        if isinstance(value, bool | int | float | str):
            out[name] = value
    return out


def _defaulted(doc: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(doc)
    for name, value in scalar_defaults().items():
        if out.get(name) is None:
            out[name] = value
    return out


def same_trace(stored: Mapping[str, Any], incoming: Mapping[str, Any]) -> bool:
    """Whether two stored-form trace documents are the same trace.

    One stored with its candidates' detail and delivered again without it (the detail sample
    changed in between) is the same trace: candidates are compared only when both carry detail.
    A field missing (or null) where it has a scalar default reads as that default (:func:`scalar_defaults`).
    """
    stored, incoming = _defaulted(stored), _defaulted(incoming)
    if stored.get("detail") == incoming.get("detail"):
        return stored == incoming
    skip = {"detail", *SAMPLED}
    return {k: v for k, v in stored.items() if k not in skip} == {k: v for k, v in incoming.items() if k not in skip}


_KINDS = {int(k): k for k in Kind}


def batch_of(items: Iterable[tuple[int, bytes]]) -> RecordBatch:
    """Build a batch from ``(kind, payload)`` pairs; a kind may be given as its number (spool frames)."""
    by_kind: dict[Kind, list[bytes]] = {}
    for kind, payload in items:
        lst = by_kind.get(_KINDS[kind])
        if lst is None:
            lst = by_kind[_KINDS[kind]] = []
        lst.append(payload)
    return RecordBatch(by_kind)
