"""The gateway's store proxy forwards every route the store serves (workers and a separate store)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from aiohttp import web

from ingest.http_api.proxy import STORE_ROUTES, add_store_proxy
from ingest.http_api.routes import IngestApi
from ingest.pipeline.emitter import TraceEmitter
from tests.ingest.http_api.test_read_token import run_with_api


def _routes(app: web.Application) -> set[tuple[str, str]]:
    routes = app.router.routes()
    return {(r.method, r.resource.canonical) for r in routes if r.resource is not None and r.method != "HEAD"}


def test_the_proxy_mounts_every_route_of_the_store(tmp_path: Path) -> None:
    store_app, proxy_app = web.Application(), web.Application()
    IngestApi(None, None).add_routes(store_app)  # type: ignore[arg-type]  # mounting reads neither
    add_store_proxy(proxy_app, "http://127.0.0.1:9", lambda rid: None)
    assert _routes(proxy_app) == _routes(store_app) == set(STORE_ROUTES)
    assert ("GET", "/v1/analytics/misroutes") in STORE_ROUTES  # the Constraints and Experiments pages read these


def test_an_analytics_query_through_the_proxy_answers_as_the_store_does(tmp_path: Path) -> None:
    async def check(base: str, em: TraceEmitter) -> None:
        app = web.Application()
        add_store_proxy(app, base, lambda rid: None)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        query = "/v1/analytics/constraints?start=2026-01-01T00:00:00Z&end=2026-01-02T00:00:00Z"
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(base + query) as direct:
                    want = (direct.status, await direct.read())
                async with session.get(f"http://127.0.0.1:{port}{query}") as proxied:
                    assert (proxied.status, await proxied.read()) == want
            assert want[0] == 200, want
        finally:
            await runner.cleanup()

    run_with_api(tmp_path, None, check)
