"""The relay route reads its body within the body timeout, as the store's other routes do.

``POST /v1/internal/records`` read its body with a bare ``await request.read()``: a caller that
announced a ``Content-Length`` and never sent all of it held the connection and the handler for
good (the intake and the gateway's routes answer 408). A real store-side emitter into DuckDB, a
real server on a loopback port, spoken to over a raw socket (only a raw socket can leave a body
unfinished).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from bench.synthetic import TraceFactory
from ingest.codec.encoder import Encoder
from ingest.duckdb.store import DuckDBTraceStore
from ingest.http_api.relay import RELAY_PATH, add_relay_route
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from schemas.config.storage import StorageSettings
from tests.router_core.gateway.test_body_read import exchange_at

TOKEN = "relay-secret"
SETTINGS = StorageSettings(batch_size=16, flush_interval_ms=5)


@asynccontextmanager
async def store_at(tmp: Path, body_timeout_s: float) -> AsyncIterator[tuple[int, TraceEmitter, DuckDBTraceStore]]:
    """A store's relay route on a loopback port: its port, emitter and store."""
    store = DuckDBTraceStore(tmp / "store.duckdb")
    emitter = TraceEmitter(store, SETTINGS, spool_dir=tmp / "spool").start()
    app = web.Application()
    add_relay_route(app, emitter, token=TOKEN, body_timeout_s=body_timeout_s)
    try:
        async with TestServer(app, host="127.0.0.1") as server:
            assert server.port is not None
            yield server.port, emitter, store
    finally:
        emitter.close()
        store.close()


def head(length: int) -> bytes:
    return (f"POST {RELAY_PATH} HTTP/1.1\r\nHost: store\r\nContent-Type: text/plain\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Length: {length}\r\n\r\n").encode()


def relay_body(n: int) -> bytes:
    enc = Encoder(1.0)
    return b"".join(b"%d\t%s\n" % (int(kind), payload) for trace in TraceFactory(seed=4).traces(n)
                    for kind, payload in enc.encode(trace) if kind is Kind.TRACE)


def test_a_relay_body_that_never_completes_gets_408_and_the_connection_closes(tmp_path: Path) -> None:
    body = relay_body(3)

    async def main() -> None:
        async with store_at(tmp_path, body_timeout_s=0.2) as (port, emitter, _):
            status, headers, answer = await exchange_at(port, head(len(body)) + body[:20])
            assert status == 408 and headers["connection"] == "close"  # its rest would read as the next request
            error = orjson.loads(answer)["error"]
            assert (error["type"], error["code"]) == ("invalid_request_error", "request_timeout")
            assert emitter.stats.queued == 0  # nothing of it taken

    asyncio.run(main())


def test_a_relay_body_sent_in_parts_within_the_timeout_is_taken(tmp_path: Path) -> None:
    body = relay_body(3)

    async def main() -> None:
        async with store_at(tmp_path, body_timeout_s=5.0) as (port, emitter, store):
            status, _, answer = await exchange_at(port, head(len(body)) + body[:20], body[20:], pause_s=0.1)
            assert status == 200 and orjson.loads(answer) == {"accepted": {"trace": 3}}
            assert await asyncio.to_thread(emitter.flush, 30)
            assert store.count(Kind.TRACE) == 3

    asyncio.run(main())


def test_the_token_is_checked_before_any_of_the_body_is_waited_for(tmp_path: Path) -> None:
    async def main() -> None:
        async with store_at(tmp_path, body_timeout_s=30.0) as (port, _, _):
            wrong = head(100).replace(TOKEN.encode(), b"guess")
            status, _, _ = await exchange_at(port, wrong + b"1\t{")  # answered now, not in 30 s
            assert status == 401

    asyncio.run(main())
