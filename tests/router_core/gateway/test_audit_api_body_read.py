"""``/v1/feedback`` and ``/v1/router/decide`` read their bodies as chat does: 408 when late, 413 when over the limit.

Both used a bare ``await request.read()``: a ``Content-Length`` never completed held the connection
and the handler for good, and feedback took 32 MiB bodies. A real gateway on a loopback port,
spoken to over a raw socket (only a raw socket can announce a length and not send it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest

from router_core.gateway.feedback import FEEDBACK_MAX_BYTES
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client
from tests.router_core.gateway.test_body_read import exchange
from tests.router_core.gateway.test_callers import Calls, counting, openai_error

ROUTES = ["/v1/feedback", "/v1/router/decide"]


def head(path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


@pytest.mark.parametrize("path", ROUTES)
def test_a_body_that_never_completes_gets_408_and_the_connection_closes(path: str) -> None:
    """Content-Length 100 and one byte sent: a 408 once body_timeout_s passes (no answer ever came before)."""

    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a")}, gateway={"body_timeout_s": 0.2}) as (client, _):
            status, headers, body = await exchange(client, head(path, 100) + b"{")
            assert status == 408 and headers["content-type"].startswith("application/json")
            error = openai_error(body)
            assert (error["type"], error["code"]) == ("invalid_request_error", "request_timeout")
            assert headers["connection"] == "close"  # the rest of the body would read as the next request
            resp = await client.post("/v1/chat/completions", json=CHAT)  # the gateway goes on answering
            assert resp.status == 200 and calls == {"a": 1}

    asyncio.run(main())


@pytest.mark.parametrize(("path", "length"), [("/v1/feedback", FEEDBACK_MAX_BYTES + 1),
                                              ("/v1/router/decide", 40 << 20)])
def test_a_content_length_over_the_limit_gets_413_before_the_body_is_sent(path: str, length: int) -> None:
    """Feedback's own 64 KiB limit, decide's chat limit (32 MiB): refused from the headers alone."""

    async def main() -> None:
        async with gateway_client({"a": counting({}, "a")}, gateway={"body_timeout_s": 5.0}) as (client, _):
            status, headers, body = await exchange(client, head(path, length))
            assert status == 413 and openai_error(body)["code"] == "request_too_large"

    asyncio.run(main())


def test_a_chunked_feedback_body_over_its_limit_is_413() -> None:
    """No Content-Length to refuse up front: the read stops past 64 KiB (it took 32 MiB before)."""

    async def main() -> None:
        async with gateway_client({"a": counting({}, "a")}) as (client, _):
            big = orjson.dumps({"request_id": "req-0", "correct": True, "source": "x" * FEEDBACK_MAX_BYTES})

            async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: sent chunked
                yield big

            resp = await client.post("/v1/feedback", data=chunks(), headers={"Content-Type": "application/json"})
            assert resp.status == 413 and openai_error(await resp.read())["code"] == "request_too_large"

    asyncio.run(main())


@pytest.mark.parametrize("path", ROUTES)
def test_a_body_arriving_in_pieces_within_the_timeout_is_read_whole(path: str) -> None:
    """The bounded read reads all of a body still on its way (a guard on the new path)."""

    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a")}, gateway={"body_timeout_s": 5.0}) as (client, _):
            await client.post("/v1/chat/completions", json=CHAT)  # the trace feedback names: req-0
            raw = orjson.dumps({"request_id": "req-0", "correct": True} if path == "/v1/feedback" else CHAT)
            status, _, body = await exchange(client, head(path, len(raw)) + raw[:5], raw[5:], pause_s=0.1)
            assert status == (202 if path == "/v1/feedback" else 200), body

    asyncio.run(main())
