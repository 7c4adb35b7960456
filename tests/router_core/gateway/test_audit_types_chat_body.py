"""The chat body's types are OpenAI's, checked at the contract: a mistyped value is a 400 naming it, before any attempt.

Found by an audit with the openai SDK and raw HTTP: the contract check was lenient, so ``stream: "false"``
was stored as a stream, ``stream_options.include_usage: "false"`` sent the client the usage chunk it
declined, ``temperature: "1.5"`` or ``n: "2"`` went on as strings, and ``max_tokens: true`` or
``stream: "yes"`` cost an upstream attempt the instance answered 400.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from aiohttp import web

from tests.router_core.gateway.gateway_kit import CHAT, Handler, gateway_client, sse
from tests.router_core.gateway.test_forwarding import OK_BODY

USER = [{"role": "user", "content": "hello"}]

REFUSED = [  # (id, fields over CHAT, the param the 400 names)
    ("stream-string-false", {"stream": "false"}, "stream"),
    ("stream-string-yes", {"stream": "yes"}, "stream"),
    ("stream-int", {"stream": 1}, "stream"),
    ("include-usage-string", {"stream": True, "stream_options": {"include_usage": "false"}},
     "stream_options.include_usage"),
    ("include-usage-int", {"stream": True, "stream_options": {"include_usage": 0}}, "stream_options.include_usage"),
    ("stream-options-without-stream", {"stream_options": {"include_usage": True}}, "stream_options"),
    ("stream-options-stream-false", {"stream": False, "stream_options": {"include_usage": False}}, "stream_options"),
    ("temperature-string", {"temperature": "1.5"}, "temperature"),
    ("temperature-bool", {"temperature": True}, "temperature"),
    ("top-p-string", {"top_p": "0.5"}, "top_p"),
    ("n-string", {"n": "2"}, "n"),
    ("n-decimal", {"n": 2.0}, "n"),
    ("n-bool", {"n": True}, "n"),
    ("max-tokens-bool", {"max_tokens": True}, "max_tokens"),
    ("max-tokens-string", {"max_tokens": "16"}, "max_tokens"),
    ("max-tokens-zero", {"max_tokens": 0}, "max_tokens"),
    ("max-completion-tokens-bool", {"max_completion_tokens": False}, "max_completion_tokens"),
    ("max-completion-tokens-zero", {"max_completion_tokens": 0}, "max_completion_tokens"),
]

SERVED = [  # (id, fields over CHAT): shapes OpenAI accepts, forwarded as sent
    ("temperature-int", {"temperature": 1, "top_p": 1, "n": 1, "max_tokens": 1}),
    ("temperature-zero", {"temperature": 0, "top_p": 0.5}),
    ("nulls", {"stream": None, "stream_options": None, "temperature": None, "max_tokens": None, "n": None}),
    ("stream-false", {"stream": False, "max_completion_tokens": 64}),
    ("multimodal", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}]}]}),
    ("tools", {"messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "42"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "auto", "parallel_tool_calls": True}),
    ("response-format", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "strict": True, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}),
    ("logprobs", {"logprobs": True, "top_logprobs": 3, "seed": 7, "stop": ["\n", "END"]}),
    ("metadata-and-extras", {"metadata": {"tier": "gold"}, "user": "u-1", "x_vendor": {"k": [1, "2", None]}}),
]


def _recording(seen: list[dict[str, Any]]) -> Handler:
    """An instance that logs each chat body it gets: a stream when asked for one, else one answer."""

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        if body.get("stream") is not True:
            return web.Response(body=orjson.dumps(OK_BODY), content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
        usage = {"id": "c", "object": "chat.completion.chunk", "choices": [],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        for event in sse(chunk, usage, "[DONE]"):
            await resp.write(event)
        await resp.write_eof()
        return resp

    return handler


async def _post(path: str, payload: dict[str, Any]) -> tuple[int, bytes, Any, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    async with gateway_client({"a": _recording(seen), "b": _recording(seen)}) as (client, hooks):
        resp = await client.post(path, json=payload)
        body = await resp.read()
        trace = hooks.traces.get(resp.headers.get("x-request-id", ""))
        return resp.status, body, trace, seen


@pytest.mark.parametrize(("fields", "param"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_mistyped_field_is_a_400_naming_it_before_any_attempt(fields: dict[str, Any], param: str) -> None:
    status, body, trace, seen = asyncio.run(_post("/v1/chat/completions", CHAT | fields))
    error = orjson.loads(body)["error"]
    assert (status, error["type"], error["code"], error["param"]) == (400, "invalid_request_error",
                                                                      "invalid_request", param), error
    assert error["message"].startswith(f"{param}: "), error
    assert seen == [] and trace.attempts == [] and trace.outcome.http_status == 400


@pytest.mark.parametrize(("fields", "param"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_the_dry_run_refuses_them_too(fields: dict[str, Any], param: str) -> None:
    status, body, _, seen = asyncio.run(_post("/v1/router/decide", CHAT | fields))
    assert status == 400 and orjson.loads(body)["error"]["param"] == param and seen == []


@pytest.mark.parametrize("fields", [c[1] for c in SERVED], ids=[c[0] for c in SERVED])
def test_what_openai_accepts_is_forwarded_as_sent(fields: dict[str, Any]) -> None:
    status, body, trace, seen = asyncio.run(_post("/v1/chat/completions", CHAT | fields))
    assert status == 200, body
    assert seen == [CHAT | fields] and len(trace.attempts) == 1


@pytest.mark.parametrize(("usage", "delivered"), [(False, False), (True, True), (None, False)])
def test_a_stream_s_usage_chunk_reaches_the_client_only_when_it_asked(usage: bool | None, delivered: bool) -> None:
    status, body, trace, seen = asyncio.run(_post("/v1/chat/completions",
                                                  CHAT | {"stream": True, "stream_options": {"include_usage": usage}}))
    assert status == 200 and trace.features.stream is True
    assert seen[0]["stream_options"]["include_usage"] is True  # the gateway asks for it to count the tokens
    assert (b'"usage"' in body) is delivered
    assert (trace.outcome.prompt_tokens, trace.outcome.completion_tokens) == (3, 1)
