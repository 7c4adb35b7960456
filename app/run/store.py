"""``routelens store``: the process that owns the trace store.

It drains what gateways relay (``ingest.http_api.relay``) through its own durable spool into
DuckDB (or Elasticsearch) and answers the store's read API. Gateways started by ``routelens
serve`` talk to it over loopback; DuckDB admits one writing process per file, and this is it.
"""

from __future__ import annotations

import sys

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from app.run.access import intake_token_of, read_token_of, relay_token_of, store_notices
from app.run.event_loop import new_event_loop
from app.run.gc_tuning import tame_gc
from app.run.logs import DEFAULT_LOG, LogSettings, configure
from app.run.storage import open_store, pipeline_paths, quarantine_in, say_backlog, say_store
from ingest import (
    SERVER_LIMITS,
    STORE_OPERATIONS,
    EmitterCollector,
    IngestApi,
    TraceEmitter,
    add_relay_route,
    http_errors,
)
from router_core import OpenApi, ParseErrorsJson
from schemas.config import RouteLensConfig
from schemas.openapi import Answer, Operation

__all__ = ["build_store_app", "run_store"]

_OWN = (Operation("GET", "/health", "Liveness, and the records waiting to be stored",
                  {200: Answer("Status"), 503: Answer("Degraded: its spool or its writes fail")},
                  tag="store"),
        Operation("GET", "/metrics", "Prometheus exposition", {200: Answer("Metrics", content_type="text/plain")},
                  tag="store"))


def build_store_app(config: RouteLensConfig, db_path: str) -> web.Application:
    """The store's application: the relay route, the read API and ``/health``."""
    st = config.storage
    say_store(st, db_path)
    store = open_store(st, db_path)
    spool_dir, quarantine_dir = pipeline_paths(st, db_path)
    own = st.model_copy(update={"flush_interval_ms": st.store_flush_interval_ms})  # its writes, not the relay's
    emitter = TraceEmitter(store, own, spool_dir=spool_dir, quarantine=quarantine_in(st, quarantine_dir)).start()
    say_backlog(emitter, spool_dir)
    app = web.Application(client_max_size=max(st.intake_max_bytes, 64 << 20), middlewares=[http_errors])
    api = IngestApi(emitter, store, token=intake_token_of(st), max_body=st.intake_max_bytes,
                    read_token=read_token_of(st), body_timeout_s=config.gateway.body_timeout_s)
    api.add_routes(app)  # the gateways forward their callers' header
    add_relay_route(app, emitter, token=relay_token_of(),  # gateways and the prober
                    body_timeout_s=config.gateway.body_timeout_s)
    registry = CollectorRegistry()
    registry.register(EmitterCollector(emitter))

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/metrics", metrics)

    async def health(_: web.Request) -> web.Response:
        # 503 while the spool takes no record (the relay refuses them then) or the writes keep failing
        reason = emitter.health()
        body: dict[str, object] = {"status": "ok" if reason is None else "degraded"}
        if reason is not None:
            body["reason"] = reason
        body |= {"backlog": emitter.backlog_size(), "storage": emitter.storage_state()}
        return web.Response(status=200 if reason is None else 503, body=orjson.dumps(body),
                            content_type="application/json")

    async def close_emitter(_: web.Application) -> None:
        emitter.close()  # stores every queued record (what it cannot stays in the spool)

    async def settle_gc(_: web.Application) -> None:
        tame_gc()  # see app.run.gc_tuning

    app.on_startup.append(settle_gc)
    app.router.add_get("/health", health)
    OpenApi("RouteLens store", config.router.version, (*STORE_OPERATIONS, *_OWN)).add_route(app)
    app.on_cleanup.append(close_emitter)
    return app


def run_store(config: RouteLensConfig, *, host: str = "127.0.0.1", port: int, db: str | None = None,
              log: LogSettings = DEFAULT_LOG) -> None:
    """Serve until SIGINT or SIGTERM; print ``store ready http://HOST:PORT`` once listening.

    ``log``: how much it logs and in what form (:mod:`app.run.logs`).

    Raises:
        AccessRefused: A route would be open on an address other than loopback (before anything
            is opened or bound; see :func:`app.run.access.store_notices`).
        SinkUnavailable: Another process writes the DuckDB file (a store that started anyway
            would answer every read with a 500), before anything is bound.
        OSError: ``host:port`` cannot be bound (in use, say).
    """
    for notice in store_notices(config, host):
        print(f"notice: {notice}", file=sys.stderr, flush=True)
    configure(log, "store")
    ParseErrorsJson.install()  # a request aiohttp cannot parse: OpenAI's JSON 400, one warning line
    db = db or config.storage.duckdb_path
    if config.storage.backend == "duckdb":  # a file another process writes: refused now, not a 500 on every read
        open_store(config.storage, db, lazy=False).close()
    app = build_store_app(config, db)
    web.run_app(app, host=host, port=port, access_log=None, loop=new_event_loop(),
                **SERVER_LIMITS,  # a long URL or header reaches the routes (an OpenAI-shaped 400), as on the gateway
                print=lambda _msg: print(f"store ready http://{host}:{port}", flush=True))
