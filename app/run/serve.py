"""``routelens serve``: the gateway wired to the trace pipeline and its query API.

Traces, feedback and quarantine records leave the gateway through one :class:`TraceEmitter`
(durable spool, then DuckDB or Elasticsearch); the same process answers the query API the app
reads (``ingest.http_api``), because DuckDB admits one writing process per file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import uvloop
from aiohttp import web
from prometheus_client import CollectorRegistry

from ingest import DuckDBTraceStore, EmitterCollector, IngestApi, Quarantine, TraceEmitter, TraceStore
from router_core.builtin import build_router, policy_hash
from router_core.gateway import Gateway
from schemas.config import RouteLensConfig
from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.storage_config import StorageSettings
from schemas.trace import DecisionTrace

if TYPE_CHECKING:
    from ingest import ElasticsearchStore

__all__ = ["StoreHooks", "build_gateway_app", "open_store", "pipeline_paths", "run_server"]


class StoreHooks:
    """Trace hooks for the gateway: emit through the pipeline, look up pending then stored traces."""

    def __init__(self, emitter: TraceEmitter, store: TraceStore) -> None:
        self.emitter = emitter
        self.store = store

    def emit(self, trace: DecisionTrace) -> bool:
        """Queue a trace for storage (durable once this returns)."""
        return self.emitter.emit(trace)

    def lookup(self, request_id: str) -> DecisionTrace | None:
        """Read-your-writes lookup."""
        return self.emitter.pending(request_id) or self.store.get(request_id)

    def record_feedback(self, feedback: Feedback) -> None:
        """Queue feedback through the same durable pipeline."""
        self.emitter.emit(feedback)

    def record_snapshots(self, snapshots: list[InstanceSnapshot]) -> None:
        """Queue a scrape round's snapshots (the instance timeline; traces then point at them)."""
        for snap in snapshots:
            self.emitter.emit(snap)


def pipeline_paths(st: StorageSettings, db_path: str) -> tuple[Path, Path]:
    """Return the spool and quarantine folders for a store (defaults sit next to the data)."""
    base = Path(db_path) if st.backend == "duckdb" else Path(st.duckdb_path).parent / "elasticsearch"
    spool = Path(st.spool.dir) if st.spool.dir else base.with_name(base.name + ".spool")
    quarantine = Path(st.quarantine_dir) if st.quarantine_dir else base.with_name(base.name + ".quarantine")
    return spool, quarantine


def open_store(st: StorageSettings, db_path: str, *, lazy: bool = True) -> DuckDBTraceStore | ElasticsearchStore:
    """Open the configured backend for writing.

    Args:
        st: The storage settings (backend, retention, Elasticsearch connection).
        db_path: The DuckDB file (used when the backend is DuckDB).
        lazy: A DuckDB file another process writes is retried on first use (the server); False
            refuses it at once (``SinkUnavailable``; one-off commands).
    """
    if st.backend == "elasticsearch":
        from ingest import ElasticsearchStore

        return ElasticsearchStore.from_settings(st.elasticsearch)
    return DuckDBTraceStore(db_path, lazy=lazy, retention_days=st.retention_days)


def build_gateway_app(config: RouteLensConfig, db_path: str) -> web.Application:
    """Build the gateway application with its trace pipeline and query API."""
    st = config.storage
    store = open_store(st, db_path)
    spool_dir, quarantine_dir = pipeline_paths(st, db_path)
    emitter = TraceEmitter(store, st, spool_dir=spool_dir, quarantine=Quarantine(quarantine_dir)).start()
    key_env = config.router.hash_key_env
    hash_key = os.environ.get(key_env) if key_env else None
    registry = CollectorRegistry()
    registry.register(EmitterCollector(emitter))
    gateway = Gateway(
        config,
        build_router(config, metrics=registry),  # plugin durations on the gateway's /metrics
        StoreHooks(emitter, store),
        hash_key=hash_key,
        policy_hash=policy_hash(config),
        registry=registry,
    )
    app = gateway.build_app()
    token = os.environ.get(st.intake_token_env) if st.intake_token_env else None
    IngestApi(emitter, store, token=token or None, max_body=st.intake_max_bytes).add_routes(app)

    async def close_emitter(_: web.Application) -> None:
        emitter.close()  # stores every queued record (what it cannot stays in the spool)

    app.on_cleanup.append(close_emitter)
    return app


def run_server(
    config: RouteLensConfig, *, host: str | None = None, port: int | None = None, db: str | None = None
) -> None:
    """Serve until SIGINT, SIGTERM or SIGHUP; print ``gateway ready http://HOST:PORT`` once listening."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host = host or config.gateway.host
    port = config.gateway.port if port is None else port
    app = build_gateway_app(config, db or config.storage.duckdb_path)
    app.on_startup.append(_hangup_stops)
    web.run_app(
        app,
        host=host,
        port=port,
        access_log=None,
        print=lambda _msg: print(f"gateway ready http://{host}:{port}", flush=True),
        loop=uvloop.new_event_loop(),
    )


async def _hangup_stops(_: web.Application) -> None:
    """SIGHUP (a closed terminal) ends the server the clean way SIGTERM does, not abruptly."""
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, os.kill, os.getpid(), signal.SIGTERM)
