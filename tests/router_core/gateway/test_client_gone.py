"""A client that leaves before its answer: its request is traced as not delivered, whatever the answer's kind.

The API audit's cases: a stream whose client closed before the gateway wrote its headers left no
trace at all (the write raised past the finisher, and the upstream response and in-flight count
were not let go); a whole answer whose client had gone was traced ``ok``, as if delivered.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from schemas import OutcomeStatus
from schemas.trace import DecisionTrace
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client, sse
from tests.router_core.gateway.test_forwarding import OK_BODY, MemoryHooks

ANSWER_AFTER_S = 0.3  # the instance answers this long after the request: the client has gone by then
CHUNK = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}


async def slow(request: web.Request) -> web.StreamResponse:
    """A whole answer, or a stream when the request asks for one, once the client has gone."""
    stream = (await request.json()).get("stream") is True
    await asyncio.sleep(ANSWER_AFTER_S)
    if not stream:
        return web.json_response(OK_BODY)
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await out.prepare(request)
    for chunk in sse(CHUNK, "[DONE]"):
        await out.write(chunk)
    await out.write_eof()
    return out


async def send_and_leave(client: Any, request_id: str, body: dict[str, Any], after_s: float = 0.1) -> None:
    """The whole request on a new connection, then the connection closed ``after_s`` later, before any answer."""
    data = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
                 + f"X-Request-Id: {request_id}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    await writer.drain()
    await asyncio.sleep(after_s)  # 0.1: the gateway has read the body and is waiting for the instance
    writer.close()
    await writer.wait_closed()


async def traced(hooks: MemoryHooks, request_id: str) -> DecisionTrace:
    for _ in range(100):
        if request_id in hooks.traces:
            return hooks.traces[request_id]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no trace for {request_id}")


def test_a_client_gone_before_its_answer_is_traced_as_not_delivered() -> None:
    async def main() -> tuple[DecisionTrace, DecisionTrace, DecisionTrace, int]:
        async with gateway_client({"a": slow, "b": slow}, gateway={"max_attempts": 1},
                                  as_served=True) as (client, hooks):
            await send_and_leave(client, "gone-stream", {**CHAT, "model": "m", "stream": True})
            stream = await traced(hooks, "gone-stream")
            await send_and_leave(client, "gone-whole", {**CHAT, "model": "m"})
            whole = await traced(hooks, "gone-whole")
            await send_and_leave(client, "gone-at-once", {**CHAT, "model": "m"}, after_s=0.0)
            at_once = await traced(hooks, "gone-at-once")
            after = await client.post("/v1/chat/completions", json=CHAT)  # the gateway goes on serving
            return stream, whole, at_once, after.status

    stream, whole, at_once, status = asyncio.run(main())
    assert status == 200
    if at_once.attempts:  # the body was read before the close was seen: traced as a whole answer not delivered
        assert at_once.outcome.error_class == "client_disconnected"
    else:  # the close came first: the body could not be read; a trace all the same
        assert (at_once.outcome.http_status, at_once.outcome.error_class) == (499, "client_disconnected")
    assert stream.outcome.status is OutcomeStatus.ERROR
    assert stream.outcome.error_class == "stream_interrupted:client_disconnected"
    assert whole.outcome.status is OutcomeStatus.ERROR and whole.outcome.error_class == "client_disconnected"
    assert [a.status.value for a in [*stream.attempts, *whole.attempts]] == ["ok", "ok"]  # the instances answered
