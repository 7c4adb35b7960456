"""The store's query API as docs/http-api.md describes it, found wanting by driving ``routelens serve`` with curl.

A ``routelens store`` application (:func:`app.run.store.build_store_app`) serves on 127.0.0.1 with its
real server limits; each test is one finding of that audit:

- a window whose ``end`` is before its ``start`` was an empty 200 on ``/v1/probes``, ``/v1/events``,
  ``/v1/snapshots``, ``/v1/quarantine``, ``/v1/analytics/latches`` and ``/v1/analytics/groups``
  (``/v1/traces`` refuses it: a typo'd date looked like "nothing happened");
- ``/v1/analytics/compare``'s cross-field checks answered ``param: "query"`` and ``<record>: Value error, ...``;
- a time whose zone's ``+`` was left unescaped in the URL (a space on arrival) got no hint why;
- the intake's 401 said ``unauthorized`` where every other 401 (and the doc) says ``invalid_api_key``;
- a header value that is not UTF-8 on the store's own port was a text/plain 500 with a traceback;
- a gzip body sent to the store's own ``POST /v1/traces`` was read as JSON and quarantined line by line
  (the gateway answers it 415 ``unsupported_content_encoding``, as the doc says);
- a hung store made the gateway's proxy answer ``the trace store is unreachable: `` with nothing after it.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from app.run.procs import free_port
from app.run.store import build_store_app
from ingest import SERVER_LIMITS
from ingest.http_api.openapi import STORE_OPERATIONS
from ingest.http_api.proxy import add_store_proxy
from schemas.config import RouteLensConfig

S, E = "2026-12-07T00:00:00Z", "2026-12-08T00:00:00Z"
READ = {"Authorization": "Bearer r-tok"}


@pytest.fixture(autouse=True)
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H5_READ", "r-tok")
    monkeypatch.setenv("H5_INTAKE", "i-tok")
    monkeypatch.delenv("ROUTELENS_RELAY_TOKEN", raising=False)


def _config(tmp_path: Path) -> RouteLensConfig:
    return RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{free_port()}"}]},
        "probes": {"enabled": False},
        "storage": {"spool": {"dir": str(tmp_path / "spool")}, "quarantine_dir": str(tmp_path / "quarantine"),
                    "flush_interval_ms": 20, "read_token_env": "H5_READ", "intake_token_env": "H5_INTAKE"},
    })


@asynccontextmanager
async def store(tmp_path: Path) -> AsyncIterator[int]:
    """The store's application on 127.0.0.1 (its port), with the server limits ``routelens store`` runs it with."""
    runner = web.AppRunner(build_store_app(_config(tmp_path), str(tmp_path / "t.duckdb")), **SERVER_LIMITS)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def call(port: int, method: str, path: str, headers: dict[str, str] | None = None,
               data: bytes | None = None) -> tuple[int, str, Any]:
    async with aiohttp.ClientSession() as session, session.request(
            method, f"http://127.0.0.1:{port}{path}", headers=headers, data=data) as resp:
        return resp.status, resp.content_type, orjson.loads(await resp.read())


WINDOWED = ["/v1/probes", "/v1/events", "/v1/snapshots", "/v1/quarantine", "/v1/analytics/latches",
            "/v1/analytics/groups"]


@pytest.mark.parametrize("path", WINDOWED)
def test_a_window_ending_before_it_starts_is_a_400_naming_end(tmp_path: Path, path: str) -> None:
    async def main() -> None:
        async with store(tmp_path) as port:
            status, _, body = await call(port, "GET", f"{path}?start={E}&end={S}", READ)
            assert status == 400, body
            assert body["error"]["code"] == "invalid_parameter" and body["error"]["param"] == "end"
            assert "end must not be before start" in body["error"]["message"]
            status, _, body = await call(port, "GET", f"{path}?start={S}&end={E}", READ)  # the right way round
            assert status == 200, body

    asyncio.run(main())


@pytest.mark.parametrize(("query", "param", "says"), [
    (f"a=x&b=x&start={S}&end={E}", "a", "a and b must differ"),
    (f"a=x&b=y&start={E}&end={S}", "end", "end must be after start"),
    (f"a=x&b=y&start={S}&end={E}&shares=0,1", "shares", "designed shares must be positive"),
])
def test_compare_names_the_parameter_a_cross_field_check_refused(tmp_path: Path, query: str, param: str,
                                                                 says: str) -> None:
    async def main() -> None:
        async with store(tmp_path) as port:
            status, _, body = await call(port, "GET", f"/v1/analytics/compare?{query}", READ)
            assert status == 400 and body["error"]["code"] == "invalid_parameter", body
            assert body["error"]["param"] == param
            assert body["error"]["message"] == says  # no "<record>: Value error, " in front

    asyncio.run(main())


@pytest.mark.parametrize("path", ["/v1/traces?start=2026-12-07T08:00:00+08:00",
                                  f"/v1/probes?start=2026-12-07T08:00:00+08:00&end={E}",
                                  f"/v1/analytics/compare?a=x&b=y&start=2026-12-07T08:00:00+08:00&end={E}"])
def test_a_zone_plus_left_unescaped_in_the_url_is_explained(tmp_path: Path, path: str) -> None:
    async def main() -> None:
        async with store(tmp_path) as port:
            status, _, body = await call(port, "GET", path, READ)
            assert status == 400 and body["error"]["param"] == "start", body
            assert "%2B" in body["error"]["message"]
            fixed = path.replace("+08:00", "%2B08:00")
            assert (await call(port, "GET", fixed, READ))[0] == 200

    asyncio.run(main())


def test_the_intake_401_is_invalid_api_key_as_every_other(tmp_path: Path) -> None:
    async def main() -> None:
        async with store(tmp_path) as port:
            status, _, body = await call(port, "POST", "/v1/traces", {"Authorization": "Bearer nope"}, b"[]")
            assert status == 401 and body["error"]["code"] == "invalid_api_key", body
            status, _, body = await call(port, "GET", "/v1/traces", {"Authorization": "Bearer nope"})
            assert status == 401 and body["error"]["code"] == "invalid_api_key", body

    asyncio.run(main())


async def _raw(port: int, request: bytes) -> tuple[int, bytes, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head, body


@pytest.mark.parametrize("path", [b"/v1/traces", b"/v1/analytics/traffic", b"/v1/nothing"])
def test_a_header_that_is_not_utf8_is_a_json_400_not_a_500(tmp_path: Path, path: bytes) -> None:
    async def main() -> None:
        async with store(tmp_path) as port:
            status, head, body = await _raw(port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                            b"Authorization: Bearer \xff\xfe\r\n\r\n")
            assert status == 400, head
            assert b"application/json" in head
            error = orjson.loads(body)["error"]
            assert error["code"] == "invalid_header" and error["param"] == "Authorization"
            assert b"\xff" not in body

    asyncio.run(main())


def test_a_compressed_intake_body_is_a_415_and_nothing_is_quarantined(tmp_path: Path) -> None:
    async def main() -> None:
        async with store(tmp_path) as port:
            packed = gzip.compress(b'{"request_id": "r1"}\n{"request_id": "r2"}\n')
            headers = {"Authorization": "Bearer i-tok", "Content-Encoding": "gzip"}
            status, _, body = await call(port, "POST", "/v1/traces", headers, packed)
            assert status == 415, body
            assert body["error"]["code"] == "unsupported_content_encoding"
            assert body["error"]["param"] == "Content-Encoding"
            status, _, body = await call(port, "GET", f"/v1/quarantine?start={S}&end=2100-01-01T00:00:00Z", READ)
            assert status == 200 and body["records"] == []
            plain = {"Authorization": "Bearer i-tok", "Content-Encoding": "identity"}
            status, _, body = await call(port, "POST", "/v1/traces", plain, b"[]")
            assert status != 415, body  # identity is no coding

    asyncio.run(main())


@pytest.mark.parametrize("path", ["/v1/analytics/buckets", "/v1/analytics/window", "/v1/analytics/experiment-series"])
def test_openapi_marks_the_window_routes_start_and_end_required(path: str) -> None:
    op = next(o for o in STORE_OPERATIONS if o.path == path)
    assert op.query is not None
    required = {name for name, f in op.query.model_fields.items() if f.is_required()}
    assert {"start", "end"} <= required


async def _serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def test_a_store_that_does_not_answer_is_a_503_that_says_so() -> None:
    """A hung store (SIGSTOP) answered after 60 s with ``the trace store is unreachable: `` and nothing after it."""

    async def main() -> None:
        hung, release = web.Application(), asyncio.Event()

        async def never(_: web.Request) -> web.Response:
            await release.wait()
            return web.Response()

        hung.router.add_get("/v1/traces", never)
        store_runner, store_port = await _serve(hung)
        gateway = web.Application()
        add_store_proxy(gateway, f"http://127.0.0.1:{store_port}", lambda rid: None, store_timeout_s=0.3)
        gateway_runner, port = await _serve(gateway)
        try:
            status, _, body = await call(port, "GET", "/v1/traces?limit=1")
            assert status == 503 and body["error"]["code"] == "store_unavailable", body
            assert body["error"]["message"] == "the trace store is unreachable: no answer within 0.3 s"
            release.set()
            await store_runner.cleanup()  # gone: the connection error's own words
            status, _, body = await call(port, "GET", "/v1/traces?limit=1")
            assert status == 503 and body["error"]["code"] == "store_unavailable", body
            assert body["error"]["message"].removeprefix("the trace store is unreachable: ")
        finally:
            release.set()
            await gateway_runner.cleanup()
            await store_runner.cleanup()

    asyncio.run(main())
