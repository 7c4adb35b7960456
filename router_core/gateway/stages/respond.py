"""The answer an instance gave, relayed to the client: a stream chunk by chunk, or the whole body.

A stream is decoded when the client cannot take the upstream's encoding, its usage chunk stripped
when the client did not ask for it; a whole body is re-encoded for the client's
``Accept-Encoding``. The gateway finishes the request's one trace with what :class:`Relayed` says:
a client that went away before its answer is recorded as such (``client_disconnected``; a stream's
``stream_interrupted:client_disconnected``, before its first byte as after), never as delivered.
The trace is finished before a whole answer is written (it is durable before the client can look
it up), so a client that leaves during that write is not seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from router_core.gateway.encoding import Decoder, coding_of, for_client
from router_core.gateway.forward import Forwarded
from router_core.gateway.streaming import relay_stream
from router_core.resilience.answer_cache import AnswerCache
from router_core.state.inflight import InflightCounter

__all__ = ["CLIENT_GONE", "CLIENT_GONE_STREAM", "Relayed", "relay_answer", "tokens_of", "usage_of"]

CLIENT_GONE = "client_disconnected"  # the error of a whole answer whose client had gone when it was ready
CLIENT_GONE_STREAM = "stream_interrupted:client_disconnected"  # as the stream relay names it mid-stream


@dataclass(frozen=True, slots=True)
class Relayed:
    """The answer as relayed, and the outcome its trace records (status, error, cost, TTFT, tokens)."""

    response: web.StreamResponse
    status: int
    error: str | None
    usage: dict[str, Any]


async def relay_answer(request: web.Request, fwd: Forwarded, headers: dict[str, str], t0: float, *,
                       stream: bool, client_usage: bool, idle_timeout_s: float, inflight: InflightCounter,
                       answers: AnswerCache, answer_key: str | None, cost: float) -> Relayed:
    """Relay the answer of the instance that served (``fwd.spec``) with ``headers``; the caller finishes the trace.

    A stream has been sent whole when this returns; a whole body is returned to be sent. ``cost``:
    the instance's price of this request (``Policy.price``: its peak premium at the request's time),
    the outcome's cost when it answered.
    """
    spec, resp = fwd.spec, fwd.response
    assert spec is not None and resp is not None
    upstream_coding = resp.headers.get("Content-Encoding")
    if stream and resp.status == 200:
        coding = coding_of(upstream_coding)
        decoder = Decoder(coding) if Decoder.can_decode(coding) else None
        if coding and decoder is None and upstream_coding:
            headers["Content-Encoding"] = upstream_coding  # cannot decode it: label it as it came
        out = web.StreamResponse(status=200, headers=headers)
        out.content_type = resp.content_type
        ttft = None if fwd.first_byte_at is None else max(0.0, (fwd.first_byte_at - t0) * 1e3)
        try:
            try:
                await out.prepare(request)
            except ConnectionError:  # the client left before its answer began: let go of the upstream, trace it
                resp.close()
                return Relayed(out, 200, CLIENT_GONE_STREAM, {"cost": cost, "ttft_ms": ttft})
            end = await relay_stream(fwd.first_chunk, resp, out, idle_timeout_s=idle_timeout_s,
                                     strip_usage=not client_usage, decoder=decoder)
        finally:  # however the relay ends, cancelled too: an external instance has no scrape to clear it
            if fwd.open_stream is not None:
                inflight.end(fwd.open_stream)
        return Relayed(out, 200, end.error, {"cost": cost, "ttft_ms": ttft, **tokens_of(end.usage)})
    sent = for_client(fwd.body, upstream_coding, request.headers.get("Accept-Encoding"))
    if sent.encoding is not None:
        headers["Content-Encoding"] = sent.encoding
    usage = usage_of(sent.plain) if resp.status == 200 and sent.plain is not None else {}
    if answer_key is not None and resp.status == 200 and sent.plain is not None:
        answers.put(answer_key, sent.plain, resp.content_type)  # memory only: never in a trace
    response = web.Response(status=resp.status, body=sent.payload, content_type=resp.content_type, headers=headers)
    error = None if resp.status < 400 else f"upstream_{resp.status}"
    if error is None and (request.transport is None or request.transport.is_closing()):
        error = CLIENT_GONE  # it will not read this answer: the trace must not say it was delivered
    return Relayed(response, resp.status, error,
                   {"cost": cost if resp.status == 200 else None, **tokens_of(usage)})


def usage_of(body: bytes) -> dict[str, Any]:
    """Return the ``usage`` object of an OpenAI JSON response, or {} when absent or unparseable."""
    try:
        usage = orjson.loads(body).get("usage")
    except (orjson.JSONDecodeError, AttributeError):
        return {}
    return usage if isinstance(usage, dict) else {}


def tokens_of(usage: dict[str, Any]) -> dict[str, int | None]:
    """``prompt_tokens`` and ``completion_tokens`` of a usage object (None where missing or not a count)."""
    def count(name: str) -> int | None:
        value = usage.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    return {"prompt_tokens": count("prompt_tokens"), "completion_tokens": count("completion_tokens")}
