"""The one way traces, probe results, snapshots and events reach storage and come back out."""

from ingest.base import RecordBatch, RecordSink, TraceReader, WriteResult
from ingest.duckdb_store import DuckDBTraceStore
from ingest.emitter import EmitterStats, TraceEmitter
from ingest.errors import SinkError, SinkUnavailable, SpoolCorrupted, SpoolFull, SpoolUnavailable
from ingest.query import TraceStore

__all__ = [
    "DuckDBTraceStore",
    "EmitterStats",
    "RecordBatch",
    "RecordSink",
    "SinkError",
    "SinkUnavailable",
    "SpoolCorrupted",
    "SpoolFull",
    "SpoolUnavailable",
    "TraceEmitter",
    "TraceReader",
    "TraceStore",
    "WriteResult",
]
