"""Counters of the trace pipeline (exported by :mod:`ingest.pipeline.metrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ingest.kinds import Kind

__all__ = ["COUNTERS", "STORE", "PipelineStats", "SinkStats"]

STORE = "store"  # the durable sink's name among the sinks


@dataclass
class SinkStats:
    """What one sink did with the records handed to it (the store, or one exporter).

    At rest ``delivered + rejected + dropped`` is every record the sink was given.

    Attributes:
        delivered: Records the sink took (stored, already held, or sent on).
        rejected: Records refused one by one: the store's are quarantined; an exporter's are
            counted here only (the store has them), as are the invalid unchecked traces withheld
            from an exporter.
        dropped: Records given up: an exporter's queue was full, its retries ran out, or it
            failed for good; the store's only when records held in memory (no spool) are lost at stop.
        failed: Write calls that failed.
        retried: Write calls made again after a failure.
    """

    delivered: int = 0
    rejected: int = 0
    dropped: int = 0
    failed: int = 0
    retried: int = 0


@dataclass
class PipelineStats:
    """Record counters; at rest ``queued == written + duplicates + quarantined + dropped``.

    Attributes:
        queued: Records accepted by ``emit()``.
        spooled: Records written to the durable spool (== queued unless the spool was unusable).
        replayed: Records found in the spool at start-up and delivered after a restart.
        written: Records the sink committed.
        duplicates: Records the sink already held: the same record under the same id (re-delivery,
            re-import). A different trace under a ``request_id`` already stored is no duplicate:
            the sink refuses it and it is quarantined.
        quarantined: Records refused (invalid, oversized, rejected by the sink, a different trace
            under a stored id), kept with a reason.
        dropped: Records lost on purpose: the ``drop_oldest`` policy of a full spool. 0 otherwise.
        corrupted: Records lost to a damaged spool segment (checksum mismatch).
        sink_errors: Failed batch writes (each retried).
        spool_errors: Times the spool could not take a record (full, unwritable).
        by_kind: ``written`` and ``duplicates`` of each kind, as ``[written, duplicates]``.
        sinks: Each sink's own counters by its name: ``store`` (the durable one, whose writes
            the counters above describe) first, then the exporters.
    """

    queued: int = 0
    spooled: int = 0
    replayed: int = 0
    written: int = 0
    duplicates: int = 0
    quarantined: int = 0
    dropped: int = 0
    corrupted: int = 0
    sink_errors: int = 0
    spool_errors: int = 0
    by_kind: dict[Kind, list[int]] = field(default_factory=dict)
    sinks: dict[str, SinkStats] = field(default_factory=dict)

    def count_stored(self, kind: Kind, written: int, duplicates: int) -> None:
        """Add a write's outcome for one kind (``written`` and ``duplicates`` count all kinds)."""
        self.written += written
        self.duplicates += duplicates
        pair = self.by_kind.setdefault(kind, [0, 0])
        pair[0] += written
        pair[1] += duplicates

    def stored(self, kind: Kind) -> tuple[int, int]:
        """Return ``(written, duplicates)`` of one kind so far."""
        written, duplicates = self.by_kind.get(kind, (0, 0))
        return written, duplicates


COUNTERS = tuple(f.name for f in fields(PipelineStats) if f.name not in ("by_kind", "sinks"))
