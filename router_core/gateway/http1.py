"""A lean HTTP/1.1 client for the upstream call: keep-alive connections per origin, httptools parsing.

The gateway's hot path makes one POST per attempt to an instance it already talks to. aiohttp's
client spends most of its per-request CPU on generality this path does not use (cookies, redirects,
proxies, tracing signals, multidict headers, a timer per read); on this machine that was the larger
part of the gateway's own time per request. This client writes the request in one ``write`` and
parses the answer with ``httptools`` (llhttp), nothing else.

Behaviour kept from the aiohttp client it replaces: the body comes as the upstream sent it (no
decompression: :mod:`router_core.gateway.encoding` decides); Content-Length, chunked and
read-until-close bodies; connections go back to the pool only after a complete answer that allows
keep-alive, and idle ones older than ``keepalive_s`` are not reused; at most ``limit`` requests are
in flight. Failures raise the exceptions below, named as aiohttp names them (the attempt's
``error_class`` is the exception's class name); timeouts are the caller's ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httptools

__all__ = [
    "ClientConnectorError",
    "ClientPayloadError",
    "ClientResponseError",
    "Http1Pool",
    "ServerDisconnectedError",
    "UpstreamError",
    "UpstreamResponse",
]

_MAX_HEAD = 64 * 1024  # status line and headers, bytes
_HIGH_WATER = 256 * 1024  # buffered body bytes before the socket is paused (a slow client)


class UpstreamError(Exception):
    """Root of the upstream client's failures."""


class ClientConnectorError(UpstreamError):
    """The connection could not be opened."""


class ServerDisconnectedError(UpstreamError):
    """The connection closed before the answer's head arrived."""


class ClientPayloadError(UpstreamError):
    """The connection closed (or broke) inside the answer's body."""


class ClientResponseError(UpstreamError):
    """The answer is not valid HTTP/1.1."""


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

    def __init__(self, pool: Http1Pool, key: tuple[str, str, int]) -> None:
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


class Http1Pool:
    """Keep-alive HTTP/1.1 connections to the upstreams, with at most ``limit`` requests in flight.

    Args:
        limit: Requests in flight at most (the rest wait), like aiohttp's connector ``limit``.
        keepalive_s: An idle connection older than this is closed rather than reused.
        clock: Monotonic clock (injected for tests).
    """

    def __init__(self, *, limit: int = 100, keepalive_s: float = 15.0, clock: Any = time.monotonic) -> None:
        self.sem = asyncio.Semaphore(limit)
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._keepalive_s = keepalive_s
        self._clock = clock
        self._origins: dict[str, tuple[tuple[str, str, int], str, bytes]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], *, connect_timeout_s: float | None = None,
                   ) -> UpstreamResponse:
        """Send ``POST url`` and return the response once its head has arrived.

        The caller reads the body and then calls ``release()`` (``read()`` does it) or ``close()``.

        Raises:
            ClientConnectorError: The connection could not be opened.
            ServerDisconnectedError: The connection closed before the head.
            ClientResponseError: The head is not valid HTTP.
            TimeoutError: ``connect_timeout_s`` passed while connecting.
        """
        key, target, host = self._origin(url)
        await self.sem.acquire()
        conn: _Connection | None = None
        try:
            conn = self._reuse(key) or await self._connect(key, connect_timeout_s)
            lines = [b"POST ", target, b" HTTP/1.1\r\nHost: ", host, b"\r\nContent-Length: ",
                     str(len(body)).encode(), b"\r\n"]
            for name, value in headers.items():
                if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                    raise ValueError(f"newline in the value of header {name!r}")
                lines += (name.encode("latin-1"), b": ", value.encode("latin-1"), b"\r\n")
            lines.append(b"\r\n")
            return await conn.send(b"".join(lines), body)
        except BaseException:
            if conn is None:
                self.sem.release()
            else:
                conn.done_with(reusable=False)  # releases the slot
            raise

    def _origin(self, url: str) -> tuple[tuple[str, str, int], bytes, bytes]:
        hit = self._origins.get(url)
        if hit is None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ClientConnectorError(f"cannot connect to {url!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            default = port == (443 if parts.scheme == "https" else 80)
            name = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            hit = self._origins[url] = ((parts.scheme, parts.hostname, port), target,
                                        (name if default else f"{name}:{port}").encode("idna"))
        key, target, host = hit
        return key, target.encode("latin-1"), host

    def _reuse(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        now = self._clock()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < self._keepalive_s:
                return conn
            conn._abort()
        return None

    async def _connect(self, key: tuple[str, str, int], timeout_s: float | None) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        tls: ssl.SSLContext | None = None
        if scheme == "https":
            tls = self._ssl = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout_s):
                _, proto = await loop.create_connection(lambda: _Connection(self, key), host, port, ssl=tls)
        except OSError as exc:
            raise ClientConnectorError(f"cannot connect to {host}:{port}: {exc}") from exc
        return proto

    def put_back(self, conn: _Connection) -> None:
        """Keep ``conn`` for the next request to its origin (closed when the pool is)."""
        if self._closed:
            conn._abort()
            return
        conn.idle_since = self._clock()
        self._idle.setdefault(conn.key, []).append(conn)

    def forget(self, conn: _Connection) -> None:
        """Drop ``conn`` from the idle list (it closed)."""
        idle = self._idle.get(conn.key)
        if idle and conn in idle:
            idle.remove(conn)

    async def close(self) -> None:
        """Close every idle connection; connections in use close when their response is done."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn._abort()
        self._idle.clear()
