"""A DuckDB trace file holding given traces: what ``--db FILE`` and the app's file reader open."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ingest import DuckDBTraceStore
from schemas.trace import DecisionTrace

__all__ = ["trace_file_of"]


def trace_file_of(path: Path, traces: Sequence[DecisionTrace]) -> Path:
    """Write ``traces`` into a DuckDB trace file at ``path`` (closed again); return ``path``."""
    store = DuckDBTraceStore(path)
    try:
        store.write_records(list(traces))
    finally:
        store.close()
    return path
