"""The upstream HTTP/1.1 client against raw socket servers: framings, keep-alive, failures and their classes."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from router_core.gateway.http1 import (
    ClientConnectorError,
    ClientPayloadError,
    ClientResponseError,
    Http1Pool,
    ServerDisconnectedError,
)


def answer(status: int, body: bytes, *headers: str, close: bool = False) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", *headers]
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = next((int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length")), 0)
    return head + await reader.readexactly(length)


@asynccontextmanager
async def server(reply: Callable[[int, bytes], bytes | None]) -> AsyncIterator[tuple[str, list[bytes], list[int]]]:
    """A server answering the n-th request (over all connections) with ``reply(n, request)``; None closes."""
    requests: list[bytes] = []
    conns: list[int] = []

    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(len(conns))
        writers.append(writer)
        try:
            while True:
                req = await read_request(reader)
                requests.append(req)
                out = reply(len(requests) - 1, req)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
                if b"Connection: close" in out:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/chat/completions", requests, conns
    finally:
        await close_server(srv, writers)


async def close_server(srv: asyncio.Server, writers: list[asyncio.StreamWriter]) -> None:
    srv.close()
    for writer in writers:
        writer.close()
    await asyncio.sleep(0.01)  # the handlers see their connection end
    await srv.wait_closed()


def run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 10))


def test_keep_alive_reuses_one_connection_and_sends_the_request_as_given() -> None:
    async def go() -> None:
        async with server(lambda n, _: answer(200, b'{"n": %d}' % n, "Content-Type: application/json; x=1")) as (
                url, requests, conns):
            pool = Http1Pool()
            for n in range(3):
                resp = await pool.post(url, b'{"q": 1}', {"X-Request-Id": f"r{n}", "Content-Type": "application/json"})
                got = (resp.status, resp.content_type, await resp.read())
                assert got == (200, "application/json", b'{"n": %d}' % n)
            assert len(conns) == 1
            assert requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
            assert b"X-Request-Id: r0\r\n" in requests[0] and requests[0].endswith(b'\r\n\r\n{"q": 1}')
            assert b"Content-Length: 8\r\n" in requests[0] and b"Host: 127.0.0.1:" in requests[0]
            await pool.close()

    run(go())


def test_connection_close_answers_are_not_reused() -> None:
    async def go() -> None:
        async with server(lambda n, _: answer(200, b"x", close=True)) as (url, _, conns):
            pool = Http1Pool()
            for _ in range(2):
                assert await (await pool.post(url, b"", {})).read() == b"x"
            assert len(conns) == 2

    run(go())


def test_chunked_and_gzip_bodies_come_as_sent() -> None:
    packed = gzip.compress(b'{"usage": {}}')
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n"
    chunked += b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (5, packed[:5], len(packed) - 5, packed[5:])

    async def go() -> None:
        async with server(lambda n, _: chunked) as (url, _, conns):
            pool = Http1Pool()
            for _ in range(2):
                resp = await pool.post(url, b"{}", {})
                assert resp.headers.get("Content-Encoding") == "gzip"
                assert gzip.decompress(await resp.read()) == b'{"usage": {}}'
            assert len(conns) == 1  # a complete chunked answer keeps the connection

    run(go())


def test_a_body_delimited_by_the_close_is_read_whole() -> None:
    async def go() -> None:
        async with server(lambda n, _: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end") as (url, _, _c):
            resp = await Http1Pool().post(url, b"", {})
            assert await resp.read() == b"until the end"

    run(go())


def test_a_stream_arrives_piece_by_piece() -> None:
    async def go() -> None:
        gate = asyncio.Event()

        writers: list[asyncio.StreamWriter] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
            await writer.drain()
            await gate.wait()
            writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
            await writer.drain()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/"
        pool = Http1Pool()
        resp = await pool.post(url, b"", {})
        assert await resp.content.readany() == b"first"
        gate.set()
        assert await resp.content.readany() == b"second"
        assert await resp.content.readany() == b""
        resp.release()
        await pool.close()
        await close_server(srv, writers)

    run(go())


@pytest.mark.parametrize(("raw", "error"), [
    (None, ServerDisconnectedError),  # closed before any answer
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", ClientPayloadError),
    (b"NOT HTTP AT ALL\r\n\r\n", ClientResponseError),
])
def test_broken_answers_raise_the_classes_aiohttp_names(raw: bytes | None, error: type[Exception]) -> None:
    async def go() -> None:  # the server closes after what it sends
        writers: list[asyncio.StreamWriter] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            await read_request(reader)
            if raw is not None:
                writer.write(raw)
                await writer.drain()
            writer.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/"
        with pytest.raises(error):
            resp = await Http1Pool().post(url, b"", {})
            await resp.read()
        await close_server(srv, writers)

    run(go())


def test_a_refused_connection_is_a_connector_error() -> None:
    async def go() -> None:
        srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        await close_server(srv, [])
        with pytest.raises(ClientConnectorError) as info:
            await Http1Pool().post(f"http://127.0.0.1:{port}/", b"", {})
        assert type(info.value).__name__ == "ClientConnectorError"

    run(go())


def test_an_idle_connection_past_its_keep_alive_is_not_reused() -> None:
    async def go() -> None:
        async with server(lambda n, _: answer(200, b"ok") if n == 0 else answer(200, b"again")) as (url, _, conns):
            pool = Http1Pool()
            assert await (await pool.post(url, b"", {})).read() == b"ok"
            for idle in pool._idle.values():
                for conn in idle:
                    conn.idle_since -= 100.0  # idle longer than keepalive_s: closed, not reused
            assert await (await pool.post(url, b"", {})).read() == b"again"
            assert len(conns) == 2

    run(go())


def test_the_limit_holds_requests_until_a_response_is_done() -> None:
    async def go() -> None:
        async with server(lambda n, _: answer(200, b"%d" % n)) as (url, _, conns):
            pool = Http1Pool(limit=1)
            first = await pool.post(url, b"", {})
            second = asyncio.ensure_future(pool.post(url, b"", {}))
            await asyncio.sleep(0.05)
            assert not second.done()
            assert await first.read() == b"0"
            assert await (await second).read() == b"1"
            assert len(conns) == 1

    run(go())


def test_a_closed_response_drops_its_connection() -> None:
    async def go() -> None:
        async with server(lambda n, _: answer(200, b"x")) as (url, _, conns):
            pool = Http1Pool()
            (await pool.post(url, b"", {})).close()
            assert await (await pool.post(url, b"", {})).read() == b"x"
            assert len(conns) == 2

    run(go())


def test_a_header_value_with_a_newline_is_refused() -> None:
    async def go() -> None:
        async with server(lambda n, _: answer(200, b"x")) as (url, requests, _c):
            with pytest.raises(ValueError):
                await Http1Pool().post(url, b"", {"Authorization": "Bearer x\r\nX-Evil: 1"})
            assert requests == []

    run(go())


def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def go() -> None:
        async with server(lambda n, _: answer(200, b"%d" % n)) as (url, _, conns):
            pool = Http1Pool()
            assert await (await pool.post(url, b"", {})).read() == b"0"
            for idle in pool._idle.values():
                for conn in idle:
                    assert conn.transport is not None
                    conn.transport.close()  # as when the server's keep-alive timeout closes it
            await asyncio.sleep(0.01)
            assert await (await pool.post(url, b"", {})).read() == b"1"
            assert len(conns) == 2

    run(go())
