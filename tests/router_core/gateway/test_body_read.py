"""Reading the chat body: a body that never completes is a 408, an announced size over the limit a 413 at once.

A real gateway on a loopback port, spoken to over a raw socket: only a raw socket can announce a
``Content-Length`` and then not send it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from tests.router_core.gateway.gateway_kit import CHAT, gateway_client
from tests.router_core.gateway.test_callers import Calls, counting, openai_error

PATIENCE_S = 5.0  # how long a test waits for an answer: far above the timeouts set here, far below a hang
HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"


async def exchange(client: Any, *parts: bytes, pause_s: float = 0.0) -> tuple[int, dict[str, str], bytes]:
    """Send ``parts`` to the test client's server (see :func:`exchange_at`)."""
    return await exchange_at(client.server.port, *parts, pause_s=pause_s, host=client.server.host)


async def exchange_at(port: int, *parts: bytes, pause_s: float = 0.0,
                      host: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
    """Send ``parts`` on a new connection (``pause_s`` between them); the answer, or TimeoutError after PATIENCE_S."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        for i, part in enumerate(parts):
            if i and pause_s:
                await asyncio.sleep(pause_s)
            writer.write(part)
            await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), PATIENCE_S)
        status_line, *lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines if ln)}
        body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), PATIENCE_S)
        return int(status_line.split()[1]), headers, body
    finally:
        writer.close()


def test_a_body_that_never_completes_gets_408_and_the_gateway_answers_the_next_request() -> None:
    """Content-Length 100 and 9 bytes sent: a 408 once body_timeout_s passes (it hung for good before)."""

    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a")}, gateway={"body_timeout_s": 0.2}) as (client, hooks):
            status, headers, body = await exchange(client, HEAD + b"Content-Length: 100\r\n\r\n" + b'{"model":')
            assert status == 408 and headers["content-type"].startswith("application/json")
            error = openai_error(body)
            assert (error["type"], error["code"]) == ("invalid_request_error", "request_timeout")
            assert headers["connection"] == "close"  # the rest of the body would read as the next request
            trace = hooks.traces[headers["x-request-id"]]
            assert (trace.outcome.http_status, trace.outcome.error_class) == (408, "request_timeout")
            assert calls == {}
            resp = await client.post("/v1/chat/completions", json=CHAT)
            assert resp.status == 200 and calls == {"a": 1}

    asyncio.run(main())


def test_a_content_length_over_the_limit_gets_413_without_its_body_being_sent() -> None:
    """40 MiB announced, over the 32 MiB limit: refused from the headers alone (it waited for the body before)."""

    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a")}) as (client, hooks):
            status, headers, body = await exchange(client, HEAD + b"Content-Length: 41943040\r\n\r\n")
            assert status == 413 and headers["content-type"].startswith("application/json")
            assert openai_error(body)["code"] == "request_too_large"
            trace = hooks.traces[headers["x-request-id"]]
            assert (trace.outcome.http_status, trace.outcome.error_class) == (413, "request_too_large")
            assert calls == {}

    asyncio.run(main())


def test_a_body_arriving_in_pieces_within_the_timeout_is_served() -> None:
    """The bounded read of a body still on its way reads all of it (a guard on the new path, not a bug)."""

    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a")}, gateway={"body_timeout_s": 5.0}) as (client, _):
            raw = orjson.dumps(CHAT)
            status, _, _ = await exchange(client, HEAD + b"Content-Length: %d\r\n\r\n" % len(raw) + raw[:9], raw[9:],
                                          pause_s=0.1)
            assert status == 200 and calls == {"a": 1}

    asyncio.run(main())
