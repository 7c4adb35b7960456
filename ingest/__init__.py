"""The one way traces, probe results, snapshots and events reach storage and come back out."""

from ingest.base import RecordBatch, RecordSink, WriteResult
from ingest.duckdb_store import DuckDBTraceStore
from ingest.emitter import TraceEmitter
from ingest.errors import SinkError, SinkUnavailable, SpoolFull, SpoolUnavailable
from ingest.query import TraceStore

__all__ = [
    "DuckDBTraceStore",
    "RecordBatch",
    "RecordSink",
    "SinkError",
    "SinkUnavailable",
    "SpoolFull",
    "SpoolUnavailable",
    "TraceEmitter",
    "TraceStore",
    "WriteResult",
]
