"""Compressed upstream answers reach the client as it asked for them, and the trace has their token counts."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from router_core.gateway.encoding import accepts, for_client
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client, sse, trace_of
from tests.router_core.gateway.test_forwarding import OK_BODY


def gzip_upstream(seen: list[str]) -> Any:
    """An upstream (or a proxy in front of it) that answers gzip whatever it was asked."""

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Accept-Encoding", ""))
        resp = web.Response(body=gzip.compress(orjson.dumps(OK_BODY)), content_type="application/json")
        resp.headers["Content-Encoding"] = "gzip"
        return resp

    return handler


async def post_raw(accept_encoding: str, payload: dict[str, Any] = CHAT, handler: Any = None,
                   ) -> tuple[int, bytes, dict[str, str], Any, list[str]]:
    seen: list[str] = []
    async with gateway_client({"a": handler or gzip_upstream(seen)}) as (client, hooks):
        # A session that shows the bytes as sent (the test client's own would decompress them).
        async with aiohttp.ClientSession(auto_decompress=False) as raw:
            async with raw.post(client.make_url("/v1/chat/completions"), json=payload,
                                headers={"Accept-Encoding": accept_encoding}) as resp:
                body = await resp.read()
                headers = {k.lower(): v for k, v in resp.headers.items()}
        return resp.status, body, headers, trace_of(hooks, headers), seen


def test_a_gzip_answer_is_decompressed_for_a_client_that_did_not_ask_for_gzip() -> None:
    status, body, headers, trace, seen = asyncio.run(post_raw("identity"))
    assert status == 200 and orjson.loads(body) == OK_BODY  # readable, as labelled
    assert "content-encoding" not in headers and headers["content-type"].startswith("application/json")
    assert (trace.outcome.prompt_tokens, trace.outcome.completion_tokens) == (3, 5)
    assert seen == ["gzip, deflate"]  # only codings the gateway can read are offered upstream


def test_a_gzip_answer_passes_through_to_a_client_that_accepts_gzip() -> None:
    status, body, headers, trace, _ = asyncio.run(post_raw("br, gzip;q=0.8"))
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert orjson.loads(gzip.decompress(body)) == OK_BODY
    assert (trace.outcome.prompt_tokens, trace.outcome.completion_tokens) == (3, 5)  # read either way


def test_a_gzip_stream_from_a_proxy_reaches_the_client_decoded_with_its_usage() -> None:
    seen: list[str] = []

    async def gzip_stream(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("Accept-Encoding", ""))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"})
        await resp.prepare(request)
        comp = zlib.compressobj(wbits=31)
        usage = {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 1}}
        for event in sse({"choices": [{"index": 0, "delta": {"content": "hi"}}]}, usage, "[DONE]"):
            await resp.write(comp.compress(event) + comp.flush(zlib.Z_SYNC_FLUSH))
        await resp.write(comp.flush())
        await resp.write_eof()
        return resp

    status, body, headers, trace, _ = asyncio.run(post_raw("gzip", CHAT | {"stream": True}, gzip_stream))
    assert status == 200 and "content-encoding" not in headers
    assert body.startswith(b"data: ") and body.endswith(b"data: [DONE]\n\n") and b'"usage"' not in body
    assert (trace.outcome.prompt_tokens, trace.outcome.completion_tokens) == (2, 1)
    assert seen == ["identity"]  # asked uncompressed: a compressor would hold chunks back


@pytest.mark.parametrize(("header", "coding", "expected"), [
    ("gzip", "gzip", True), ("GZIP;q=0.5", "gzip", True), ("gzip;q=0", "gzip", False),
    ("*", "gzip", True), ("gzip;q=0, *", "gzip", False), ("br", "gzip", False), (None, "gzip", False),
    ("deflate, gzip", "deflate", True), ("identity", "gzip", False),
])
def test_accept_encoding(header: str | None, coding: str, expected: bool) -> None:
    assert accepts(header, coding) is expected


def test_for_client_decodes_deflate_both_ways_and_passes_what_it_cannot_read() -> None:
    plain = b'{"usage": {}}'
    for deflated in (zlib.compress(plain), zlib.compress(plain)[2:-4]):  # zlib-wrapped, and raw
        assert for_client(deflated, "deflate", None).payload == plain
    unknown = for_client(b"\x00br", "br", None)
    assert (unknown.payload, unknown.encoding, unknown.plain) == (b"\x00br", "br", None)
    corrupt = for_client(b"not gzip", "gzip", "identity")
    assert (corrupt.payload, corrupt.encoding, corrupt.plain) == (b"not gzip", "gzip", None)
