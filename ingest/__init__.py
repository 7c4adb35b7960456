"""The one way traces, probe results, snapshots and events reach storage and come back out.

The names below are the package's public face: other rooms import them from ``ingest`` itself,
never from a submodule, so the package can be laid out by concern behind them (only the benchmarks
of one stage, ``bench/ingest.py`` and ``bench/lookup.py``, reach into that stage). They are loaded
on first use (PEP 562), so ``import ingest`` pulls in neither DuckDB, aiohttp nor the
Elasticsearch client until something asks for them.

Behind them, by concern; each part imports only parts listed before it:

- ``errors``, ``kinds``, ``record_sink``, ``trace_store``: what the rest shares (the error tree,
  the record kinds, the sink protocol and its batches, the query protocol and its cursors);
- ``analytics``: constraint binding counts tallied from stored rows (both backends share it);
- ``experiments``: comparing two arms (pure statistics, the report from per-side figures, the
  inverse-propensity estimate); both backends share it;
- ``codec/``: records to JSON and JSON to Arrow (with the C decoder), the storage schema, stored
  rows back to models;
- ``spool/``: the durable spool on disk;
- ``pipeline/``: from ``emit()`` to the sinks: emitter, backlog, batcher (the store), export
  queues (exporters), counters, quarantine (its docstring follows one frame and lists the threads
  and locks);
- ``duckdb/``, ``elasticsearch/``: the two backends, each a sink and a reader;
- ``otel/``: the OpenTelemetry exporter, a sink beside the store (each trace as spans over OTLP);
- ``intake/``: traces from outside (HTTP bodies, files, other routers' field names);
- ``http_api/``: the store's HTTP API and its client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingest.codec.stored_rows import clean as clean_row
    from ingest.codec.stored_rows import readable_state
    from ingest.duckdb.predicates import where as duckdb_where
    from ingest.duckdb.store import OFFLINE as DUCKDB_OFFLINE
    from ingest.duckdb.store import DuckDBTraceStore
    from ingest.elasticsearch.store import ElasticsearchStore
    from ingest.errors import SinkError, SinkUnavailable, SpoolFull, SpoolUnavailable
    from ingest.experiments.compare import assumed_even_split
    from ingest.experiments.ips import ips_report
    from ingest.experiments.stats import wilson_interval
    from ingest.http_api.answers import SERVER_LIMITS, http_errors
    from ingest.http_api.client import HttpTraceStore, Unauthorized
    from ingest.http_api.openapi import STORE_OPERATIONS
    from ingest.http_api.proxy import add_store_proxy
    from ingest.http_api.relay import RelaySink, add_relay_route
    from ingest.http_api.routes import IngestApi
    from ingest.intake.field_mapping import GENERIC, MAPPINGS
    from ingest.intake.file_import import check_format as check_import_format
    from ingest.intake.file_import import import_file
    from ingest.otel.build import EXPORTER_NAME as OTEL_EXPORTER
    from ingest.otel.build import build_otel_sink
    from ingest.otel.metrics import OtelCollector
    from ingest.pipeline.emitter import TraceEmitter
    from ingest.pipeline.metrics import EmitterCollector
    from ingest.pipeline.quarantine import Quarantine
    from ingest.record_sink import PreparedBatch, RecordBatch, RecordSink, Rejected, WriteResult
    from ingest.spool.durable_spool import spool_backlog
    from ingest.trace_store import MAX_LIMIT, BadCursor, TraceStore

# public name -> the module that defines it (``module:name`` where it is named otherwise there)
_EXPORTS: dict[str, str] = {
    "BadCursor": "ingest.trace_store",
    "DuckDBTraceStore": "ingest.duckdb.store",
    "ElasticsearchStore": "ingest.elasticsearch.store",
    "EmitterCollector": "ingest.pipeline.metrics",
    "GENERIC": "ingest.intake.field_mapping",
    "HttpTraceStore": "ingest.http_api.client",
    "IngestApi": "ingest.http_api.routes",
    "MAPPINGS": "ingest.intake.field_mapping",
    "MAX_LIMIT": "ingest.trace_store",
    "OTEL_EXPORTER": "ingest.otel.build:EXPORTER_NAME",
    "OtelCollector": "ingest.otel.metrics",
    "PreparedBatch": "ingest.record_sink",
    "Quarantine": "ingest.pipeline.quarantine",
    "RecordBatch": "ingest.record_sink",
    "RecordSink": "ingest.record_sink",
    "Rejected": "ingest.record_sink",
    "RelaySink": "ingest.http_api.relay",
    "STORE_OPERATIONS": "ingest.http_api.openapi",
    "SERVER_LIMITS": "ingest.http_api.answers",
    "SinkError": "ingest.errors",
    "SinkUnavailable": "ingest.errors",
    "SpoolFull": "ingest.errors",
    "SpoolUnavailable": "ingest.errors",
    "TraceEmitter": "ingest.pipeline.emitter",
    "spool_backlog": "ingest.spool.durable_spool",
    "TraceStore": "ingest.trace_store",
    "Unauthorized": "ingest.http_api.client",
    "WriteResult": "ingest.record_sink",
    "add_relay_route": "ingest.http_api.relay",
    "assumed_even_split": "ingest.experiments.compare",
    "add_store_proxy": "ingest.http_api.proxy",
    "build_otel_sink": "ingest.otel.build",
    "clean_row": "ingest.codec.stored_rows:clean",
    "DUCKDB_OFFLINE": "ingest.duckdb.store:OFFLINE",
    "duckdb_where": "ingest.duckdb.predicates:where",
    "http_errors": "ingest.http_api.answers",
    "import_file": "ingest.intake.file_import",
    "check_import_format": "ingest.intake.file_import:check_format",
    "ips_report": "ingest.experiments.ips",
    "readable_state": "ingest.codec.stored_rows",
    "wilson_interval": "ingest.experiments.stats",
}

__all__ = [
    "BadCursor",
    "DuckDBTraceStore",
    "ElasticsearchStore",
    "EmitterCollector",
    "GENERIC",
    "HttpTraceStore",
    "IngestApi",
    "MAPPINGS",
    "MAX_LIMIT",
    "OTEL_EXPORTER",
    "OtelCollector",
    "PreparedBatch",
    "Quarantine",
    "RecordBatch",
    "RecordSink",
    "Rejected",
    "RelaySink",
    "SERVER_LIMITS",
    "STORE_OPERATIONS",
    "SinkError",
    "SinkUnavailable",
    "SpoolFull",
    "SpoolUnavailable",
    "TraceEmitter",
    "TraceStore",
    "Unauthorized",
    "WriteResult",
    "add_relay_route",
    "assumed_even_split",
    "add_store_proxy",
    "build_otel_sink",
    "clean_row",
    "DUCKDB_OFFLINE",
    "duckdb_where",
    "http_errors",
    "check_import_format",
    "import_file",
    "ips_report",
    "readable_state",
    "wilson_interval",
    "spool_backlog",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'ingest' has no attribute {name!r}")
    module, _, defined_as = where.partition(":")
    value = getattr(importlib.import_module(module), defined_as or name)
    globals()[name] = value  # later lookups skip this function
    return value
