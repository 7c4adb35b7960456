"""``routelens serve``: the gateway wired to the DuckDB trace store."""

from __future__ import annotations

import logging
import os

import uvloop
from aiohttp import web
from prometheus_client import CollectorRegistry

from ingest.duckdb_store import DuckDBTraceStore
from ingest.emitter import TraceEmitter
from ingest.metrics import EmitterCollector
from router_core.builtin import build_router, policy_hash
from router_core.gateway import Gateway
from schemas.config import RouteLensConfig
from schemas.feedback import Feedback
from schemas.trace import DecisionTrace

__all__ = ["StoreHooks", "run_server"]


class StoreHooks:
    """Trace hooks for the gateway: emit through the emitter, look up pending then stored traces."""

    def __init__(self, emitter: TraceEmitter, store: DuckDBTraceStore) -> None:
        self.emitter = emitter
        self.store = store

    def emit(self, trace: DecisionTrace) -> bool:
        """Queue a trace for storage."""
        return self.emitter.emit(trace)

    def lookup(self, request_id: str) -> DecisionTrace | None:
        """Read-your-writes lookup."""
        return self.emitter.pending(request_id) or self.store.get(request_id)

    def record_feedback(self, feedback: Feedback) -> None:
        """Store feedback directly (a handful per request at most)."""
        self.store.write_feedback([feedback])


def build_gateway_app(config: RouteLensConfig, db_path: str) -> web.Application:
    """Build the gateway application with its store and emitter."""
    store = DuckDBTraceStore(db_path)
    st = config.storage
    emitter = TraceEmitter(
        store, queue_size=st.queue_size, batch_size=st.batch_size, flush_interval_s=st.flush_interval_ms / 1000
    ).start()
    key_env = config.router.hash_key_env
    registry = CollectorRegistry()
    registry.register(EmitterCollector(emitter))
    gateway = Gateway(
        config,
        build_router(config),
        StoreHooks(emitter, store),
        hash_key=os.environ.get(key_env) if key_env else None,
        policy_hash=policy_hash(config),
        registry=registry,
    )
    app = gateway.build_app()

    async def close_emitter(_: web.Application) -> None:
        emitter.close()  # flushes every queued trace before the process exits

    app.on_cleanup.append(close_emitter)
    return app


def run_server(
    config: RouteLensConfig, *, host: str | None = None, port: int | None = None, db: str | None = None
) -> None:
    """Serve until SIGINT or SIGTERM; print ``gateway ready http://HOST:PORT`` once listening."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host = host or config.gateway.host
    port = config.gateway.port if port is None else port
    app = build_gateway_app(config, db or config.storage.duckdb_path)
    web.run_app(
        app,
        host=host,
        port=port,
        access_log=None,
        print=lambda _msg: print(f"gateway ready http://{host}:{port}", flush=True),
        loop=uvloop.new_event_loop(),
    )
