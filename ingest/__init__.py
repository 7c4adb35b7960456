"""The one way traces reach storage and come back out."""

from ingest.base import TraceReader, TraceSink
from ingest.duckdb_store import DuckDBTraceStore
from ingest.emitter import EmitterStats, TraceEmitter
from ingest.errors import SinkError, SinkUnavailable

__all__ = [
    "DuckDBTraceStore",
    "EmitterStats",
    "SinkError",
    "SinkUnavailable",
    "TraceEmitter",
    "TraceReader",
    "TraceSink",
]
