"""Counters of the trace pipeline (exported by :mod:`ingest.metrics`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PipelineStats"]


@dataclass
class PipelineStats:
    """Record counters; at rest ``queued == written + duplicates + quarantined + dropped``.

    Attributes:
        queued: Records accepted by ``emit()``.
        spooled: Records written to the durable spool (== queued unless the spool was unusable).
        replayed: Records found in the spool at start-up and delivered after a restart.
        written: Records the sink committed.
        duplicates: Records the sink already held under the same id (re-delivery, re-import).
        quarantined: Records refused (invalid, oversized, rejected by the sink), kept with a reason.
        dropped: Records lost on purpose: the ``drop_oldest`` policy of a full spool. 0 otherwise.
        corrupted: Records lost to a damaged spool segment (checksum mismatch).
        sink_errors: Failed batch writes (each retried).
        spool_errors: Times the spool could not take a record (full, unwritable).
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
