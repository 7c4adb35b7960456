"""The store's read API behind ``storage.read_token_env``: 401 in OpenAI's shape, HttpTraceStore sends it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from app.reader import READ_TOKEN_ENV, reader_from_env
from bench.synthetic import T0, TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.errors import SinkError
from ingest.http_api.client import HttpTraceStore
from ingest.http_api.routes import IngestApi
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from schemas.config.storage import StorageSettings
from tests.serve_thread import on_loop

GETS = ["/v1/traces", "/v1/traces/nope", "/v1/analytics/traffic",
        f"/v1/probes?start={T0.isoformat()}&end={T0.isoformat()}".replace("+", "%2B")]


def run_with_api(tmp_path: Path, read_token: str | None, check: Any) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    em = TraceEmitter(store, StorageSettings(flush_interval_ms=5), spool_dir=tmp_path / "spool",
                      quarantine=Quarantine(tmp_path / "q", clock=lambda: T0)).start()

    async def main() -> None:
        app = web.Application()
        IngestApi(em, store, token="intake-t", read_token=read_token).add_routes(app)
        async with on_loop(app) as url:
            await check(url, em)

    try:
        asyncio.run(main())
    finally:
        em.close()


def test_the_get_routes_require_the_read_token(tmp_path: Path) -> None:
    async def check(base: str, em: TraceEmitter) -> None:
        async with aiohttp.ClientSession() as session:
            for path in GETS:
                for auth in (None, "Bearer wrong", "Bearer intake-t", "read-t"):
                    headers = {"Authorization": auth} if auth else {}
                    async with session.get(base + path, headers=headers) as resp:
                        assert resp.status == 401, (path, auth)
                        error = orjson.loads(await resp.read())["error"]
                        assert (error["type"], error["param"], error["code"]) == (
                            "invalid_request_error", None, "invalid_api_key")
                async with session.get(base + path, headers={"Authorization": "Bearer read-t"}) as resp:
                    assert resp.status in (200, 404), path  # 404: the unknown trace id, past the check
            # The intake keeps its own token: the read token does not open it.
            async with session.post(base + "/v1/traces", data=b"[]", headers={"Authorization": "Bearer read-t"}) as r:
                assert r.status == 401

    run_with_api(tmp_path, "read-t", check)


def test_http_trace_store_sends_the_token(tmp_path: Path, factory: TraceFactory) -> None:
    trace = factory.trace()

    async def check(base: str, em: TraceEmitter) -> None:
        assert em.emit(trace)
        with_token = HttpTraceStore(base, token="read-t")
        found = await asyncio.to_thread(with_token.get, trace.request_id)
        assert found is not None and found.request_id == trace.request_id
        with pytest.raises(SinkError, match="401"):
            await asyncio.to_thread(HttpTraceStore(base).get, trace.request_id)
        from_env = reader_from_env({"ROUTELENS_API_URL": base, READ_TOKEN_ENV: "read-t"})
        assert (await asyncio.to_thread(from_env.get, trace.request_id)) is not None

    run_with_api(tmp_path, "read-t", check)


def test_without_a_read_token_the_queries_are_open(tmp_path: Path) -> None:
    async def check(base: str, em: TraceEmitter) -> None:
        async with aiohttp.ClientSession() as session, session.get(base + "/v1/traces") as resp:
            assert resp.status == 200

    run_with_api(tmp_path, None, check)


def test_the_gateways_store_proxy_answers_its_pending_traces_only_with_the_token(
    tmp_path: Path, factory: TraceFactory
) -> None:
    from ingest.http_api.proxy import add_store_proxy

    trace = factory.trace()

    async def check(base: str, em: TraceEmitter) -> None:
        app = web.Application()
        add_store_proxy(app, base, lambda rid: trace if rid == trace.request_id else None, read_token="read-t")
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/v1/traces/{trace.request_id}"
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(url) as resp:  # forwarded: the store refuses it
                    assert resp.status == 401
                async with session.get(url, headers={"Authorization": "Bearer read-t"}) as resp:
                    assert resp.status == 200 and orjson.loads(await resp.read())["request_id"] == trace.request_id
        finally:
            await runner.cleanup()

    run_with_api(tmp_path, "read-t", check)
