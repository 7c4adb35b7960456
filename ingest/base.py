"""What every trace sink provides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from schemas.trace import DecisionTrace

__all__ = ["TraceReader", "TraceSink"]


class TraceSink(Protocol):
    """Stores batches of traces. Called from one background thread only."""

    def write_batch(self, traces: Sequence[DecisionTrace]) -> None:
        """Store ``traces`` durably or raise :class:`ingest.errors.SinkError`."""
        ...

    def close(self) -> None:
        """Release the sink's resources."""
        ...


class TraceReader(Protocol):
    """Looks traces up; safe to call from any thread."""

    def get(self, request_id: str) -> DecisionTrace | None:
        """Return the stored trace of ``request_id``, or None when unknown."""
        ...
