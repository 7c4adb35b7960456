"""The gateway's store proxy forwards every route the store serves (workers and a separate store)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.http_api.proxy import STORE_ROUTES, add_store_proxy, store_series
from ingest.http_api.routes import IngestApi
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.metrics import EmitterCollector
from ingest.pipeline.quarantine import Quarantine
from schemas.config.storage import StorageSettings
from tests.ingest.http_api.test_read_token import run_with_api
from tests.promtext import samples


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


def test_the_stores_series_are_renamed_to_sit_beside_the_gateways_own(tmp_path: Path) -> None:
    # Two pipelines' expositions, as a gateway and its store process give them: the same family names.
    def exposition(name: str, traces: int) -> bytes:
        em = TraceEmitter(DuckDBTraceStore(tmp_path / f"{name}.duckdb"), StorageSettings(flush_interval_ms=5),
                          spool_dir=tmp_path / f"{name}.spool", quarantine=Quarantine(tmp_path / f"{name}.q")).start()
        try:
            for trace in TraceFactory(seed=1, n_candidates=2).traces(traces):
                em.emit(trace)
            assert em.flush(20)
            registry = CollectorRegistry()
            registry.register(EmitterCollector(em))
            return generate_latest(registry)
        finally:
            em.close()

    gateway, store = exposition("gateway", 3), exposition("store", 5)
    both = gateway + store_series(store + b"# a comment\nother_metric 1.0\n")
    scrape = samples(both.decode())  # one valid exposition: no series twice
    assert scrape.value("routelens_records_written_total", kind="trace") == 3
    assert scrape.value("routelens_store_records_written_total", kind="trace") == 5
    names = {name for name, _ in scrape}
    assert {n.removeprefix("routelens_store_") for n in names if n.startswith("routelens_store_")} == {
        n.removeprefix("routelens_") for n in names if not n.startswith("routelens_store_")}
    assert "other_metric" not in names
