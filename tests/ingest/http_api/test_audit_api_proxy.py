"""The gateway's store proxy: a body read within the body timeout, and a trace another worker still holds.

``POST /v1/traces`` through the gateway read its body with a bare ``await request.read()``: a
``Content-Length`` never completed held the connection for good (chat answers 408). And a lookup
by request id answered from this worker's pending traces and the store only: with ``serve
--workers N`` a trace the answering worker never saw, and the store not yet, was a 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from bench.synthetic import TraceFactory
from ingest.http_api.answers import error_response
from ingest.http_api.proxy import add_store_proxy
from schemas.trace import DecisionTrace
from tests.router_core.gateway.test_body_read import exchange_at as exchange

TRACES = list(TraceFactory(seed=1, n_candidates=2).traces(3))
Elsewhere = Callable[[str], Awaitable[DecisionTrace | None]]


class StubStore:
    """A store that knows ``known`` (by request id), accepts intake, and counts what it was asked."""

    def __init__(self, known: dict[str, DecisionTrace] | None = None) -> None:
        self.known = dict(known or {})
        self.asked: list[str] = []
        self.intake: list[bytes] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/traces/{request_id}", self.get)
        app.router.add_post("/v1/traces", self.post)
        return app

    async def get(self, request: web.Request) -> web.Response:
        rid = request.match_info["request_id"]
        self.asked.append(rid)
        if rid in self.known:
            return web.Response(body=self.known[rid].model_dump_json(), content_type="application/json")
        return error_response(404, f"no trace {rid}", "trace_not_found")

    async def post(self, request: web.Request) -> web.Response:
        self.intake.append(await request.read())
        return web.json_response({"accepted": 1, "rejected": []})


@asynccontextmanager
async def proxied(store: StubStore, pending: dict[str, DecisionTrace] | None = None, *,
                  elsewhere: Elsewhere | None = None, read_token: str | None = None,
                  body_timeout_s: float = 5.0) -> AsyncIterator[int]:
    """The port of a gateway-like app whose store routes go through the proxy to ``store``."""
    async with TestServer(store.app()) as store_server:
        app = web.Application(client_max_size=1 << 20)
        add_store_proxy(app, str(store_server.make_url("")).rstrip("/"), (pending or {}).get, read_token=read_token,
                        elsewhere=elsewhere, body_timeout_s=body_timeout_s)
        async with TestServer(app) as server:
            assert server.port is not None
            yield server.port


def intake_head(length: int) -> bytes:
    return (f"POST /v1/traces HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/x-ndjson\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def test_an_intake_body_that_never_completes_gets_408_and_the_connection_closes() -> None:
    async def main() -> None:
        store = StubStore()
        async with proxied(store, body_timeout_s=0.2) as port:
            status, headers, body = await exchange(port, intake_head(100) + b"{")
            assert status == 408 and headers["connection"] == "close"
            error = orjson.loads(body)["error"]
            assert (error["type"], error["code"]) == ("invalid_request_error", "request_timeout")
            assert store.intake == []  # nothing forwarded
            line = TRACES[0].model_dump_json().encode()  # and the proxy goes on answering
            status, _, _ = await exchange(port, intake_head(len(line)) + line[:7], line[7:], pause_s=0.1)
            assert status == 200 and store.intake == [line]

    asyncio.run(main())


def test_an_intake_content_length_over_the_limit_is_413_before_the_body_is_sent() -> None:
    async def main() -> None:
        store = StubStore()
        async with proxied(store) as port:
            status, _, _ = await exchange(port, intake_head(2 << 20))  # over the app's 1 MiB
            assert status == 413 and store.intake == []

    asyncio.run(main())


def counting(found: dict[str, DecisionTrace]) -> tuple[list[str], Elsewhere]:
    asked: list[str] = []

    async def elsewhere(rid: str) -> DecisionTrace | None:
        asked.append(rid)
        return found.get(rid)

    return asked, elsewhere


async def get(port: int, rid: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/v1/traces/{rid}",
                                                                headers=headers) as resp:
        return resp.status, await resp.json()


def test_a_trace_neither_here_nor_stored_is_asked_of_the_other_workers() -> None:
    mine, theirs, nobodys = TRACES

    async def main() -> None:
        store = StubStore()
        asked, elsewhere = counting({theirs.request_id: theirs})
        async with proxied(store, {mine.request_id: mine}, elsewhere=elsewhere) as port:
            assert await get(port, mine.request_id) == (200, mine.model_dump(mode="json"))
            assert store.asked == [] and asked == []  # a hit here costs nothing more
            assert await get(port, theirs.request_id) == (200, theirs.model_dump(mode="json"))
            assert store.asked == [theirs.request_id] and asked == [theirs.request_id]
            status, body = await get(port, nobodys.request_id)
            assert (status, body["error"]["code"]) == (404, "trace_not_found")
            # the store once more after the workers missed: one may have delivered it in between
            assert store.asked == [theirs.request_id, nobodys.request_id, nobodys.request_id]

    asyncio.run(main())


def test_a_trace_stored_meanwhile_is_found_on_the_second_look() -> None:
    trace = TRACES[0]

    async def main() -> None:
        store = StubStore()

        async def delivered_meanwhile(rid: str) -> DecisionTrace | None:
            store.known[rid] = trace  # the worker that held it delivered it, and forgot it
            return None

        async with proxied(store, elsewhere=delivered_meanwhile) as port:
            assert await get(port, trace.request_id) == (200, trace.model_dump(mode="json"))

    asyncio.run(main())


def test_the_other_workers_are_asked_only_for_a_caller_with_the_read_token() -> None:
    trace = TRACES[0]

    async def main() -> None:
        store = StubStore()
        asked, elsewhere = counting({trace.request_id: trace})
        async with proxied(store, elsewhere=elsewhere, read_token="secret") as port:
            status, _ = await get(port, trace.request_id)
            assert status == 404 and asked == []  # the store checks the token itself; the workers' traces stay put
            assert await get(port, trace.request_id, "secret") == (200, trace.model_dump(mode="json"))
            assert asked == [trace.request_id]

    asyncio.run(main())


def test_an_encoded_slash_in_an_id_reaches_the_store_as_sent() -> None:
    """``GET /v1/traces/a%2Fb`` was forwarded decoded, ``/v1/traces/a/b``: no route of the store's, a text/plain 404."""
    async def main() -> tuple[int, bytes]:
        store = StubStore()
        async with proxied(store) as port, aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/v1/traces/a%2Fb?x=1") as resp:
                assert store.asked == ["a/b"]  # the store's route took it, and answered for that id
                return resp.status, await resp.read()

    status, body = asyncio.run(main())
    assert status == 404 and orjson.loads(body)["error"]["code"] == "trace_not_found"


def test_the_stores_own_refusals_are_json() -> None:
    """An unknown route or a wrong method on a store process answered text/plain, and the proxy passed it on."""
    from ingest.http_api.answers import http_errors

    async def main() -> list[tuple[int, str, dict[str, str], bytes]]:
        app = web.Application(middlewares=[http_errors])
        app.router.add_get("/v1/traces/{request_id}", StubStore().get)
        out = []
        async with TestServer(app) as server, aiohttp.ClientSession() as session:
            for method, path in (("GET", "/v1/nowhere"), ("POST", "/v1/traces/x")):
                async with session.request(method, f"http://127.0.0.1:{server.port}{path}") as resp:
                    out.append((resp.status, resp.content_type, dict(resp.headers), await resp.read()))
        return out

    (missing, wrong) = asyncio.run(main())
    assert missing[:2] == (404, "application/json") and orjson.loads(missing[3])["error"]["code"] == "not_found"
    assert wrong[:2] == (405, "application/json") and orjson.loads(wrong[3])["error"]["code"] == "method_not_allowed"
    assert "GET" in wrong[2]["Allow"]
