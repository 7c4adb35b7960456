"""Answers from a rule chain's non-LLM end: a canned answer, or a responder URL (the seed's rule engine).

Used when a matched rule's chain has no feasible instance left, or every attempt failed. A
responder gets the chat request as JSON (``stream`` off) and answers OpenAI-shaped; a client that
asked for a stream gets that answer as one SSE chunk and ``[DONE]``, as it gets a cached answer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from router_core.gateway.http1 import Http1Pool, UpstreamError
from router_core.gateway.trace_context import TraceContext
from router_core.rules.ir import DegradedTarget

__all__ = ["DegradedAnswer", "answer_from", "cached_answer"]


class DegradedAnswer:
    """What the client gets: status, payload, content type; ``error`` when the responder failed."""

    __slots__ = ("content_type", "error", "payload", "status")

    def __init__(self, status: int, payload: bytes, content_type: str, error: str | None = None) -> None:
        self.status, self.payload, self.content_type, self.error = status, payload, content_type, error


def _completion(request_id: str, model: str, content: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{request_id}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _as_stream(completion: dict[str, Any]) -> bytes:
    """One ``chat.completion.chunk`` carrying the whole message, then ``[DONE]``."""
    choices = [{"index": c.get("index", 0), "delta": c.get("message", {}), "finish_reason": c.get("finish_reason")}
               for c in completion.get("choices", [])]
    chunk = {**completion, "object": "chat.completion.chunk", "choices": choices}
    return b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n"


def _shaped(completion: dict[str, Any], stream: bool) -> DegradedAnswer:
    if stream:
        return DegradedAnswer(200, _as_stream(completion), "text/event-stream")
    return DegradedAnswer(200, orjson.dumps(completion), "application/json")


def cached_answer(payload: bytes, content_type: str, stream: bool) -> DegradedAnswer | None:
    """A cached whole answer as the client asked for it: as it was, or as one SSE chunk and ``[DONE]``.

    None when a stream was asked for and the cached body is no completion to turn into one (the
    cache keeps whole JSON answers only: sent as they are, a client reading a stream sees none).
    """
    if not stream:
        return DegradedAnswer(200, payload, content_type)
    try:
        completion = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
        return None
    return _shaped(completion, True)


async def answer_from(target: DegradedTarget, body: dict[str, Any], request_id: str, pool: Http1Pool, *,
                      timeout_s: float, connect_timeout_s: float, trace: TraceContext | None = None) -> DegradedAnswer:
    """Answer ``body`` from ``target``; a responder that fails gives a 502 with ``error`` set.

    A responder gets the request's ``traceparent`` (its parent: the gateway's request span, as no
    attempt span stands for this call) and the client's ``tracestate``, so its spans join the trace.
    """
    stream = bool(body.get("stream"))
    if target.canned is not None:
        return _shaped(_completion(request_id, target.name, target.canned), stream)
    assert target.url is not None
    sent = {**body, "stream": False}
    sent.pop("stream_options", None)
    headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
    if trace is not None:
        headers["traceparent"] = trace.traceparent(trace.span_id)
        if trace.tracestate is not None:
            headers["tracestate"] = trace.tracestate
    try:
        async with asyncio.timeout(timeout_s):
            resp = await pool.post(target.url, orjson.dumps(sent), headers, connect_timeout_s=connect_timeout_s)
            payload = await resp.read()
    except (TimeoutError, UpstreamError, OSError) as exc:
        return DegradedAnswer(502, b"", "application/json", error=f"degraded_{type(exc).__name__}")
    if resp.status != 200:
        return DegradedAnswer(502, b"", "application/json", error=f"degraded_http_{resp.status}")
    try:
        completion = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return DegradedAnswer(502, b"", "application/json", error="degraded_invalid_json")
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list):
        return DegradedAnswer(502, b"", "application/json", error="degraded_not_a_completion")
    return _shaped(completion, stream)
