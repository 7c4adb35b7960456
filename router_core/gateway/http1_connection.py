"""One keep-alive upstream connection and the answer it parses (the parts of :mod:`router_core.gateway.http1`).

``_Connection`` is the ``asyncio.Protocol`` of one connection: it writes a request in
one ``write`` and feeds the bytes that come back to ``httptools`` (llhttp), whose callbacks fill an
:class:`UpstreamResponse`: status and headers once the head is in, the body as it arrives (reading
pauses past ``_HIGH_WATER`` buffered bytes). A connection goes back to its pool
(:class:`~router_core.gateway.http1.Http1Pool`) only after a complete answer that allows keep-alive.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

import httptools

from router_core.gateway.http1_errors import (
    ClientPayloadError,
    ClientResponseError,
    ServerDisconnectedError,
    UpstreamError,
)

__all__ = ["UpstreamResponse"]

_MAX_HEAD = 64 * 1024  # status line and headers, bytes
_HIGH_WATER = 256 * 1024  # buffered body bytes before the socket is paused (a slow client)


class _Pool(Protocol):
    """What a connection needs of its pool: the in-flight slots, and where it goes back or is forgotten."""

    sem: asyncio.Semaphore

    def put_back(self, conn: _Connection) -> None:
        """Keep ``conn`` for the next request to its origin."""

    def forget(self, conn: _Connection) -> None:
        """Drop ``conn`` from the idle list (it closed)."""


class _Headers(dict[str, str]):
    """Response headers by lower-cased name; ``get`` takes any case (a repeated header keeps its last value)."""

    def get(self, key: str, default: Any = None) -> Any:
        return dict.get(self, key.lower(), default)


class UpstreamResponse:
    """One answer: status and headers once the head is in; the body as it arrives.

    It offers the subset of ``aiohttp.ClientResponse`` the forwarder and the relay use:
    ``status``, ``headers``, ``content_type``, ``read()``, ``content.readany()``, ``release()``
    and ``close()``.
    """

    __slots__ = ("_chunks", "_conn", "_done", "_error", "_size", "_waiter", "headers", "status")

    def __init__(self, conn: _Connection) -> None:
        self._conn: _Connection | None = conn
        self.status = 0
        self.headers = _Headers()
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._done = False
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None

    @property
    def content_type(self) -> str:
        """The media type of ``Content-Type`` (without parameters), as aiohttp reports it."""
        raw = self.headers.get("content-type")
        return raw.split(";", 1)[0].strip().lower() if raw else "application/octet-stream"

    @property
    def content(self) -> UpstreamResponse:
        """The body stream (``content.readany()``, as on aiohttp's response)."""
        return self

    async def read(self) -> bytes:
        """The whole body; the connection then goes back to the pool when it may."""
        while not self._done and self._error is None:
            await self._wait()
        if self._error is not None:
            raise self._error
        body = b"".join(self._chunks)
        self._chunks.clear()
        self.release()
        return body

    async def readany(self) -> bytes:
        """What has arrived of the body (waiting for some); b"" at its end."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._done:
                return b""
            await self._wait()
        data = self._chunks.popleft() if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._size = 0
        if self._conn is not None:
            self._conn.resume()
        return data

    def release(self) -> None:
        """Give the connection back (kept only after a complete answer that allows keep-alive)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.done_with(reusable=self._done and self._error is None)

    def close(self) -> None:
        """Drop the connection, whatever state the answer is in."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.done_with(reusable=False)

    async def _wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _Connection(asyncio.Protocol):
    """One keep-alive connection: writes a request, parses its answer into an :class:`UpstreamResponse`."""

    def __init__(self, pool: _Pool, key: tuple[str, str, int]) -> None:
        self._pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._resp: UpstreamResponse | None = None
        self._head: asyncio.Future[UpstreamResponse] | None = None
        self._head_size = 0
        self._reading_paused = False
        self._keep_alive = False
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._resp is None or self._resp._done:  # bytes nobody asked for: the connection is not trusted
            self._abort()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ClientResponseError("the upstream asked to upgrade the connection"))
        except httptools.HttpParserError as exc:
            self._fail(ClientResponseError(f"invalid HTTP from the upstream: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.forget(self)
        resp = self._resp
        if resp is None or resp._done:
            return
        if self._head is not None:
            self._fail(ServerDisconnectedError("the upstream closed the connection before answering"))
        elif resp.headers.get("content-length") is None and "chunked" not in resp.headers.get(
                "transfer-encoding", "").lower():
            resp._done = True  # a body delimited by the close: it is complete now
            resp._wake()
        else:
            self._fail(ClientPayloadError("the upstream closed the connection inside the body"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value)
        if self._head_size > _MAX_HEAD:
            raise ValueError("response head too large")  # httptools turns it into HttpParserCallbackError
        if self._resp is not None:  # a repeated header keeps its first value, as aiohttp's ``get`` does
            self._resp.headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        resp = self._resp
        if resp is None:
            return
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            resp.headers.clear()
            return
        resp.status = status
        head, self._head = self._head, None
        if head is not None and not head.done():
            head.set_result(resp)

    def on_body(self, body: bytes) -> None:
        resp = self._resp
        if resp is None:
            return
        resp._chunks.append(body)
        resp._size += len(body)
        if resp._size > _HIGH_WATER and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        resp._wake()

    def on_message_complete(self) -> None:
        resp = self._resp
        if resp is None or resp.status == 0:
            return  # the end of an interim answer
        self._keep_alive = self._parser.should_keep_alive()  # llhttp forgets it once the message ends
        resp._done = True
        resp._wake()

    # used by the pool and the response
    def send(self, head: bytes, body: bytes) -> asyncio.Future[UpstreamResponse]:
        assert self.transport is not None
        self._resp = UpstreamResponse(self)
        self._head = fut = asyncio.get_running_loop().create_future()
        self._head_size = 0
        self._keep_alive = False
        self.transport.write(head + body)
        return fut

    def resume(self) -> None:
        if self._reading_paused and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()

    def done_with(self, *, reusable: bool) -> None:
        resp, self._resp = self._resp, None
        if reusable and not self.closed and resp is not None and self._keep_alive:
            self._pool.put_back(self)
        else:
            self._abort()
            self._pool.forget(self)
        self._pool.sem.release()

    def _fail(self, error: UpstreamError) -> None:
        resp = self._resp
        head, self._head = self._head, None
        if head is not None and not head.done():
            head.set_exception(error)
        if resp is not None and not resp._done and resp._error is None:
            resp._error = error
            resp._wake()
        self._abort()

    def _abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

