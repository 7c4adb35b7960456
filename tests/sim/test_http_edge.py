"""The simulator's HTTP edge: bodies as large as the gateway forwards, and every error as OpenAI-style JSON.

vLLM sets no small body limit and answers errors as JSON; aiohttp's defaults (1 MiB, text/plain)
made the simulator refuse valid requests the gateway forwarded, with an error no client could read.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

import sim.server
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas.config import RouteLensConfig
from sim.server import build_instance_app
from tests.router_core.gateway.test_forwarding import MemoryHooks

PNG = b"\x89PNG\r\n\x1a\n" + bytes(1_100_000)


def big_request(model: str) -> io.BytesIO:
    """A valid chat request of about 1.5 MB: a short question about a 1.1 MB picture."""
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    body = orjson.dumps({"model": model, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"}, {"type": "image_url", "image_url": {"url": url}}]}]})
    assert len(body) > 1_400_000
    return io.BytesIO(body)  # aiohttp warns of raw bytes this large


def test_a_valid_1_5_mb_request_is_answered(spec, profile, fast, serve, openai_schema):
    async def scenario() -> tuple[int, bytes]:
        async with serve(build_instance_app(spec, profile, fast)) as url, ClientSession() as http, \
                http.post(f"{url}/v1/chat/completions", data=big_request(spec.model)) as resp:
            return resp.status, await resp.read()

    status, raw = asyncio.run(scenario())
    assert status == 200
    openai_schema("CreateChatCompletionResponse").validate(orjson.loads(raw))


def test_the_gateway_gets_a_1_5_mb_request_answered_by_the_sim(spec, profile, fast, serve):
    """The audit's case: the sim's 413 went back through the gateway, traced as the instance's fault."""

    async def scenario() -> tuple[int, Any]:
        async with serve(build_instance_app(spec, profile, fast)) as url:
            config = RouteLensConfig.model_validate({
                "fleet": {"instances": [{"id": spec.id, "model": spec.model, "url": url}]},
                "scrape": {"interval_s": 60}})
            hooks, ids = MemoryHooks(), (f"req-{i}" for i in itertools.count())
            gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids))
            async with TestClient(TestServer(gw.build_app())) as client:
                resp = await client.post("/v1/chat/completions", data=big_request(spec.model),
                                         headers={"Content-Type": "application/json"})
                await resp.read()
                return resp.status, hooks.traces[resp.headers["x-request-id"]]

    status, trace = asyncio.run(scenario())
    assert status == 200
    assert (trace.outcome.http_status, trace.outcome.error_class) == (200, None)


ERRORS = [  # (id, method, path, body, status, code)
    ("unknown-path", "GET", "/v1/nothing", None, 404, "not_found"),
    ("wrong-method", "GET", "/v1/chat/completions", None, 405, "method_not_allowed"),
    ("body-over-the-limit", "POST", "/v1/chat/completions", b"x" * (1 << 20 | 1), 413, "request_too_large"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), [e[1:] for e in ERRORS],
                         ids=[e[0] for e in ERRORS])
def test_errors_are_openai_style_json(spec, profile, fast, serve, openai_schema, monkeypatch, method, path, body,
                                      status, code):
    # a 413 without sending 64 MiB; the body is over aiohttp's default too, so the old text/plain 413 shows
    monkeypatch.setattr(sim.server, "MAX_BODY_BYTES", 1024, raising=False)

    async def scenario() -> tuple[int, str, bytes, str | None]:
        async with serve(build_instance_app(spec, profile, fast)) as url, ClientSession() as http, \
                http.request(method, f"{url}{path}", data=body and io.BytesIO(body)) as resp:
            return resp.status, resp.content_type, await resp.read(), resp.headers.get("Allow")

    got, content_type, raw, allow = asyncio.run(scenario())
    assert (got, content_type) == (status, "application/json")
    error = orjson.loads(raw)
    openai_schema("ErrorResponse").validate(error)
    assert (error["error"]["type"], error["error"]["code"]) == ("invalid_request_error", code)
    if status == 405:
        assert allow == "POST"
