"""What every sink provides, and what the pipeline hands it.

A sink receives batches of already-serialized records (JSON objects, one per record, grouped by
kind) and stores them in one transaction or bulk request. Records it cannot take one by one (a
value Arrow cannot hold, a mapping conflict in Elasticsearch) come back in
:attr:`WriteResult.rejected` and are quarantined by the pipeline; a sink that cannot take the
batch at all raises :class:`ingest.errors.SinkUnavailable` and the batch is retried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ingest.kinds import Kind

__all__ = ["PreparedBatch", "RecordBatch", "RecordSink", "Rejected", "WriteResult", "batch_of", "merge_prepared"]


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
    """Stores batches of records; ``prepare`` and ``write`` each run on one pipeline thread."""

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        """Do the CPU-bound work for ``batch`` (no I/O; must not fail for a sink outage)."""
        ...

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Store a prepared batch or raise :class:`ingest.errors.SinkUnavailable` to have it retried."""
        ...

    def idle(self) -> None:
        """Nothing waits to be stored: do deferred upkeep now (the writer thread calls this)."""
        ...

    def close(self) -> None:
        """Release the sink's resources."""
        ...


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
