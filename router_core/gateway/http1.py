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
in flight. Failures raise the exceptions of :mod:`router_core.gateway.http1_errors` (handed on
here), named as aiohttp names them (the attempt's ``error_class`` is the exception's class name);
timeouts are the caller's ``asyncio.timeout``.

Here is :class:`Http1Pool`, the connections per origin and the request's head; one connection and
the answer it parses are :mod:`router_core.gateway.http1_connection`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from router_core.gateway.http1_connection import UpstreamResponse, _Connection
from router_core.gateway.http1_errors import (
    ClientConnectorError,
    ClientPayloadError,
    ClientResponseError,
    ServerDisconnectedError,
    UpstreamError,
)

__all__ = [
    "ClientConnectorError",
    "ClientPayloadError",
    "ClientResponseError",
    "Http1Pool",
    "ServerDisconnectedError",
    "UpstreamError",
    "UpstreamResponse",
]


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
