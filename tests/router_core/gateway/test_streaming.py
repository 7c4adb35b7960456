"""Streams: upstream errors, timeouts per phase (not a total), TTFT from arrival, usage, cuts, failover."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from router_core.gateway.streaming import SseUsage, ask_for_usage
from schemas import AttemptStatus, OutcomeStatus
from tests.router_core.gateway.gateway_kit import CHAT, Handler, gateway_client, sse, trace_of

STREAM = CHAT | {"stream": True}
USAGE = {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}
WORDS = ["one ", "two ", "three ", "four ", "five"]


def delta(text: str) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}


def streamer(pause_s: float = 0.0, seen: list[dict[str, Any]] | None = None, before: Any = None) -> Handler:
    """An OpenAI-like stream: a chunk per word, the usage chunk when asked for it, then [DONE]."""

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if seen is not None:
            seen.append(body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if before is not None:
            before()
        for i, word in enumerate(WORDS):
            if i:
                await asyncio.sleep(pause_s)
            await resp.write(sse(delta(word))[0])
        if (body.get("stream_options") or {}).get("include_usage"):
            await resp.write(sse({"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": USAGE})[0])
        await resp.write(sse("[DONE]")[0])
        await resp.write_eof()
        return resp

    return handler


def events(body: bytes) -> list[Any]:
    out = []
    for event in body.split(b"\n\n"):
        if event.startswith(b"data: "):
            data = event[6:]
            out.append(data.decode() if data == b"[DONE]" else orjson.loads(data))
    return out


def text_of(evs: list[Any]) -> str:
    return "".join(e["choices"][0]["delta"]["content"] for e in evs if isinstance(e, dict) and e.get("choices"))


async def post(handlers: dict[str, Handler], payload: dict[str, Any] = STREAM, **kw: Any) -> tuple[int, bytes, Any]:
    async with gateway_client(handlers, **kw) as (client, hooks):
        resp = await client.post("/v1/chat/completions", json=payload)
        body = await resp.read()
        return resp.status, body, trace_of(hooks, resp.headers)


def test_an_upstream_400_on_a_stream_reaches_the_client_with_its_error_body() -> None:
    error = {"error": {"message": "max_tokens is too large", "type": "invalid_request_error",
                       "param": "max_tokens", "code": None}}

    async def refuse(_: web.Request) -> web.Response:
        return web.Response(status=400, body=orjson.dumps(error), content_type="application/json")

    status, body, trace = asyncio.run(post({"a": refuse, "b": refuse}))
    assert status == 400 and orjson.loads(body) == error  # was: the status with an empty body
    assert len(trace.attempts) == 1 and trace.outcome.error_class == "upstream_400"


def test_a_long_generation_with_pauses_is_not_cut_off_by_the_total_timeout() -> None:
    # Scaled down from "2 s pauses in a 90 s generation under a 60 s total": pauses of 0.3 s, an idle
    # timeout of 1 s, and upstream_timeout_s 0.5 s, which the old code applied to the whole stream
    # (4 pauses = 1.2 s > 0.5 s: it cut this stream off after the second chunk).
    seen: list[dict[str, Any]] = []
    status, body, trace = asyncio.run(post(
        {"a": streamer(0.3, seen)},
        gateway={"upstream_timeout_s": 0.5, "idle_timeout_s": 1.0, "first_byte_timeout_s": 1.0},
    ))
    evs = events(body)
    assert status == 200 and text_of(evs) == "".join(WORDS) and evs[-1] == "[DONE]"
    assert trace.outcome.status is OutcomeStatus.OK and trace.outcome.error_class is None
    # Usage was asked for upstream, recorded, and its chunk kept from a client that did not ask.
    assert seen[0]["stream_options"] == {"include_usage": True}
    assert not any(isinstance(e, dict) and "usage" in e for e in evs)
    assert (trace.outcome.prompt_tokens, trace.outcome.completion_tokens) == (7, 4)


def test_a_client_that_asked_for_usage_gets_the_usage_chunk() -> None:
    payload = STREAM | {"stream_options": {"include_usage": True}}
    status, body, trace = asyncio.run(post({"a": streamer()}, payload))
    evs = events(body)
    assert status == 200 and {"choices": [], "usage": USAGE}.items() <= evs[-2].items()
    assert (trace.outcome.prompt_tokens, trace.outcome.completion_tokens) == (7, 4)


def test_ttft_is_measured_from_the_request_arrival() -> None:
    now = [100.0]  # the gateway's clock, advanced by the upstream: 0.25 s pass before its first byte

    def later() -> None:
        now[0] += 0.25

    status, _, trace = asyncio.run(post({"a": streamer(before=later)}, perf=lambda: now[0]))
    assert status == 200 and trace.outcome.ttft_ms == 250.0


def test_a_cut_after_the_first_chunk_ends_with_an_error_event_and_an_error_outcome() -> None:
    async def cut(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(sse(delta("half an "))[0])
        assert request.transport is not None
        request.transport.close()  # the instance dies mid-answer
        return resp

    status, body, trace = asyncio.run(post({"a": cut, "b": streamer()}))
    evs = events(body)
    assert status == 200 and text_of(evs) == "half an "
    assert evs[-1]["error"]["code"] == "stream_interrupted" and evs[-1]["error"]["type"] == "upstream_error"
    assert trace.outcome.status is OutcomeStatus.ERROR
    assert (trace.outcome.error_class or "").startswith("stream_interrupted:")
    assert [a.instance for a in trace.attempts] == ["a"]  # the client had bytes: no failover


def test_a_pause_longer_than_the_idle_timeout_ends_the_stream_with_an_error() -> None:
    status, body, trace = asyncio.run(post({"a": streamer(2.0)}, gateway={"idle_timeout_s": 0.2}))
    evs = events(body)
    assert status == 200 and text_of(evs) == WORDS[0] and "error" in evs[-1]
    assert trace.outcome.error_class == "stream_interrupted:idle_timeout"


def test_a_failure_before_the_first_byte_fails_over_to_the_next_instance() -> None:
    async def silent(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)  # headers, then nothing
        await asyncio.sleep(5)
        return resp

    status, body, trace = asyncio.run(post({"a": silent, "b": streamer()}, gateway={"first_byte_timeout_s": 0.3}))
    assert status == 200 and text_of(events(body)) == "".join(WORDS)
    assert [(a.instance, a.status) for a in trace.attempts] == [("a", AttemptStatus.TIMEOUT), ("b", AttemptStatus.OK)]
    assert trace.attempts[0].error_class == "first_byte_timeout" and trace.selected_instance == "b"

    async def closed(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        assert request.transport is not None
        request.transport.close()
        return resp

    status, body, trace = asyncio.run(post({"a": closed, "b": streamer()}))
    assert status == 200 and trace.outcome.status is OutcomeStatus.OK
    assert [a.status for a in trace.attempts] == [AttemptStatus.CONNECT_ERROR, AttemptStatus.OK]


def test_sse_usage_splits_events_across_chunks_and_strips_only_the_usage_chunk() -> None:
    raw = b"".join(sse(delta("a"), {"choices": [], "usage": USAGE}, "[DONE]")).replace(b"\n\n", b"\r\n\r\n", 1)
    for strip in (True, False):
        sse_usage, out = SseUsage(strip_usage=strip), b""
        for i in range(0, len(raw), 7):  # arbitrary cuts, mid-event and mid-separator
            out += sse_usage.feed(raw[i:i + 7])
        out += sse_usage.flush()
        assert sse_usage.usage == USAGE
        assert (b'"usage"' in out) is not strip and out.endswith(b"data: [DONE]\n\n")


def test_ask_for_usage_keeps_the_clients_other_stream_options() -> None:
    body: dict[str, Any] = {"stream_options": {"continuous_usage_stats": True}}
    assert ask_for_usage(body) is False
    assert body["stream_options"] == {"continuous_usage_stats": True, "include_usage": True}
    assert ask_for_usage({"stream_options": {"include_usage": True}}) is True


def test_sse_usage_does_not_hold_back_a_stream_without_event_separators() -> None:
    sse_usage = SseUsage(strip_usage=True)
    blob = b"x" * (1 << 20)
    assert sse_usage.feed(blob) == b"" and sse_usage.feed(b"y") == blob + b"y"  # past 1 MiB it is sent on
