"""probes.http.call_chat against real loopback servers: caps, timeouts, headers, failures as data."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from app.run.procs import free_port
from probes.http import call_chat
from probes.types import Target
from tests.probes.conftest import completion, fixed_app, serving, streaming_app

BODY = {"model": "m", "messages": [{"role": "user", "content": "Hello world"}]}


def _call(app: web.Application | None, *, timeout_s: float = 2.0, max_bytes: int = 1 << 20, api_key: str | None = None):
    async def main():
        async with aiohttp.ClientSession() as session:
            if app is None:
                target = Target("i", "m", f"http://127.0.0.1:{free_port()}")
                return await call_chat(session, target, BODY, timeout_s=timeout_s, max_bytes=max_bytes,
                                       marker_header="x-routelens-probe")
            async with serving(app) as url:
                return await call_chat(session, Target("i", "m", url, api_key), BODY, timeout_s=timeout_s,
                                       max_bytes=max_bytes, marker_header="x-routelens-probe")

    return asyncio.run(main())


def test_marker_and_key_are_sent_and_the_body_comes_back():
    seen: list[dict[str, str]] = []
    call = _call(fixed_app(completion(), seen=seen), api_key="sk-test")
    assert call.status == 200 and call.error_class is None and b"chat.completion" in (call.body or b"")
    assert seen[0]["x-routelens-probe"] == "1" and seen[0]["Authorization"] == "Bearer sk-test"


def test_no_key_no_authorization_header():
    seen: list[dict[str, str]] = []
    _call(fixed_app(completion(), seen=seen))
    assert "Authorization" not in seen[0]


def test_a_50_mb_answer_is_cut_at_the_cap_not_buffered():
    call = _call(streaming_app(50 << 20), max_bytes=1 << 20)
    assert call.status == 200 and call.body is None and call.error_class == "too_large"
    assert "1048576-byte cap" in call.error


def test_a_declared_50_mb_answer_is_refused_from_its_content_length():
    call = _call(streaming_app(50 << 20, content_length=True), max_bytes=1 << 20)
    assert call.error_class == "too_large" and "52428800 bytes" in call.error


def test_a_slow_drip_is_a_timeout():
    call = _call(streaming_app(10_000, 1, every_s=0.02, fill=b" "), timeout_s=0.3)
    assert call.error_class == "timeout" and call.status == 200 and call.body is None
    assert "not complete within 0.3 s" in call.error


def test_a_closed_port_is_a_connect_error():
    call = _call(None)
    assert call.error_class == "connect" and call.status is None and "cannot connect" in call.error


def test_a_dropped_connection_is_reported():
    async def chat(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.abort()
        return web.Response(status=500)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    call = _call(app)
    assert call.error_class == "disconnected" and call.body is None
