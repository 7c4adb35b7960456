"""``routelens probes run``: the prober on its own, for a fleet that several gateways serve.

It probes the configured fleet, publishes verdicts at ``GET /v1/probes/verdicts`` (gateways with
``probes.follow_url`` pointing here take them), active alerts at ``GET /v1/alerts``, its metrics
at ``/metrics``, its schedule's health at ``GET /v1/probes/stats`` (slips, skips) and ``/health``
(503 while it produces no results). Results and events go to the
trace store: relayed to a running store (``--store-url``, e.g. a ``routelens store``) through a
spool of its own, or written to the configured backend directly when nothing else writes it.

Its verdicts, alerts and stats take the store's read token (``storage.read_token_env``: the one
a gateway following it sends), with or without ``--store-url``; owning the store, it serves the
store's query API and intake too, each behind its token. Open, it starts on loopback only
(:func:`app.run.access.prober_notices`).
"""

from __future__ import annotations

import argparse
import hmac
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from app.config import load_config
from app.run.access import intake_token_of, prober_notices, read_token_of, relay_token_of
from app.run.event_loop import new_event_loop
from app.run.gc_tuning import tame_gc
from app.run.logs import DEFAULT_LOG, LogSettings, configure
from app.run.prober import Prober
from app.run.storage import open_store, pipeline_paths, quarantine_in, say_store
from ingest import EmitterCollector, IngestApi, RelaySink, TraceEmitter, http_errors
from router_core import ParseErrorsJson
from schemas.config import RouteLensConfig
from schemas.query_params import GivenTwice, one_value_each

__all__ = ["build_probe_app", "run"]

Handler = Callable[[web.Request], Awaitable[web.Response]]
_NO_TOKEN = {"error": {"message": "a valid read token is required: send 'Authorization: Bearer <token>'",
                       "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}


def _bad_param(param: str, message: str) -> web.Response:
    """A 400 ``invalid_parameter`` naming ``param``, in OpenAI's shape (as the store's routes answer)."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param,
                      "code": "invalid_parameter"}}
    return web.Response(status=400, body=orjson.dumps(body), content_type="application/json")


def _behind(token: str | None, handler: Handler) -> Handler:
    """``handler`` behind the read token (401 in OpenAI's shape, as the store's routes answer); None: open."""
    if token is None:
        return handler
    expected = f"Bearer {token}".encode()

    async def guarded(request: web.Request) -> web.Response:
        if not hmac.compare_digest(request.headers.get("Authorization", "").encode(), expected):
            return web.Response(status=401, body=orjson.dumps(_NO_TOKEN), content_type="application/json")
        return await handler(request)

    return guarded


def build_probe_app(config: RouteLensConfig, *, store_url: str | None = None, db: str | None = None) -> web.Application:
    """The standalone prober's application (its pipeline and prober start and stop with it)."""
    st = config.storage
    db_path = db or st.duckdb_path
    spool_dir, quarantine_dir = pipeline_paths(st, db_path)
    registry = CollectorRegistry()
    read_token = read_token_of(st)
    if store_url is not None:
        spool_dir = spool_dir.with_name(spool_dir.name + ".prober")
        emitter = TraceEmitter(RelaySink(store_url, token=relay_token_of()), st,
                               spool_dir=spool_dir,
                               quarantine=quarantine_in(st, quarantine_dir.with_name(quarantine_dir.name + ".prober")))
        api = None
    else:
        say_store(st, db_path)
        store = open_store(st, db_path)
        emitter = TraceEmitter(store, st, spool_dir=spool_dir, quarantine=quarantine_in(st, quarantine_dir))
        # it owns the store: it answers its reads and takes intake, as routelens store would
        api = IngestApi(emitter, store, token=intake_token_of(st), max_body=st.intake_max_bytes,
                        read_token=read_token, body_timeout_s=config.gateway.body_timeout_s)
    emitter.start()
    registry.register(EmitterCollector(emitter))
    prober = Prober(config, db_path=db_path, emit=emitter.emit, apply=None, registry=registry, source="prober")
    app = web.Application(middlewares=[http_errors])
    if api is not None:
        api.add_routes(app)

    async def verdicts(_: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(prober.feed()), content_type="application/json")

    async def alerts(_: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps({"alerts": prober.alerts()}), content_type="application/json")

    async def stats(request: web.Request) -> web.Response:
        try:  # ?reset=1: the counts start again after this answer
            reset = one_value_each(request.query.items(), ("reset",)).get("reset") == "1"
        except GivenTwice as exc:
            return _bad_param(exc.param, str(exc))
        body = prober.stats(reset=reset)
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health(_: web.Request) -> web.Response:
        problem = prober.problem()
        body = {"status": "ok"} if problem is None else {"status": "degraded", "reason": problem}
        return web.Response(status=200 if problem is None else 503, body=orjson.dumps(body),
                            content_type="application/json")

    async def start(_: web.Application) -> None:
        await prober.start()
        tame_gc()

    async def stop(_: web.Application) -> None:
        await prober.stop()
        emitter.close(timeout_s=1.0)  # the rest stays in the spool: a child told to stop must go at once

    app.router.add_get("/v1/probes/verdicts", _behind(read_token, verdicts))
    app.router.add_get("/v1/alerts", _behind(read_token, alerts))
    app.router.add_get("/v1/probes/stats", _behind(read_token, stats))
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


def run(args: argparse.Namespace, log: LogSettings = DEFAULT_LOG) -> int:
    """Serve the standalone prober until SIGINT or SIGTERM; print ``prober ready http://HOST:PORT``.

    ``log``: how much it logs and in what form (:mod:`app.run.logs`).

    Raises:
        AccessRefused: A route would be open on an address other than loopback (before anything
            is opened or bound; see :func:`app.run.access.prober_notices`).
    """
    configure(log, "prober")
    config = load_config(args.config) if Path(args.config).is_file() else None
    if config is None:
        print(f"error: {args.config}: no such configuration file", flush=True)
        return 2
    host = getattr(args, "host", None) or "127.0.0.1"
    port = getattr(args, "port", None) or 8092  # beside the store's 8090, on one host
    store_url = getattr(args, "store_url", None)
    for notice in prober_notices(config, host, owns_store=store_url is None):
        print(f"notice: {notice}", file=sys.stderr, flush=True)
    app = build_probe_app(config, store_url=store_url, db=getattr(args, "db", None))
    ParseErrorsJson.install()  # a request aiohttp cannot parse: OpenAI's JSON 400, one warning line
    web.run_app(app, host=host, port=port, access_log=None, loop=new_event_loop(), shutdown_timeout=1.0,
                print=lambda _msg: print(f"prober ready http://{host}:{port}", flush=True))
    return 0
