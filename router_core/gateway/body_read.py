"""Reading a request's body within ``gateway.body_timeout_s``: the one read every gateway route that takes a body uses.

A client can hold the gateway by announcing a ``Content-Length`` it never completes, or a size
over the limit that it starts to send. aiohttp bounds neither: its server has no read timeout,
and it checks ``client_max_size`` only as the bytes arrive. :func:`read_body` refuses an
announced size over the limit before reading anything (413), and bounds the read of a body still
on its way (408, :class:`BodyTimeout`). An ordinary body has arrived with its headers and is
read without a timer, so the bound costs only the request whose body is late.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from router_core.gateway.errors import error_response
from router_core.resilience.prefilter import Refusal

__all__ = ["BodyTimeout", "read_body", "refusal_response"]


class BodyTimeout(Refusal):
    """408: the body did not arrive within ``gateway.body_timeout_s``.

    Its rest may still come, and would read as the next request: the answer closes the connection.
    """

    __slots__ = ()

    def headers(self) -> dict[str, str]:
        """``Connection: close`` (RFC 9110 15.5.9)."""
        return {"Connection": "close"}


async def read_body(http: web.Request, timeout_s: float, *, limit: int | None = None) -> bytes | BodyTimeout:
    """The request's body, or a :class:`BodyTimeout` when it does not arrive within ``timeout_s``.

    Args:
        http: The request.
        timeout_s: How long a body that has not arrived with its headers may take.
        limit: The largest body taken, in bytes (None: the application's ``client_max_size``).

    Raises:
        web.HTTPRequestEntityTooLarge: The body is over the limit; when its ``Content-Length``
            says so, before any of it is read.
    """
    cap = http.client_max_size if limit is None else min(limit, http.client_max_size)
    size = http.content_length
    if size is not None and size > cap:
        raise web.HTTPRequestEntityTooLarge(cap, size)
    if http.content.is_eof():  # the ordinary request: the whole body came with the headers
        return await _read(http, cap)
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(http, cap)
    except TimeoutError:
        return BodyTimeout(408, f"the request body did not arrive within {timeout_s:g} s", "request_timeout")


async def _read(http: web.Request, cap: int) -> bytes:
    if cap == http.client_max_size:
        return await http.read()  # aiohttp counts against client_max_size itself
    body = await http.content.read(cap + 1)  # a chunked body has no Content-Length to refuse up front
    while len(body) <= cap and not http.content.at_eof():
        body += await http.content.read(cap + 1 - len(body))
    if len(body) > cap:
        raise web.HTTPRequestEntityTooLarge(cap, len(body))
    return body


def refusal_response(refusal: Refusal) -> web.Response:
    """The OpenAI-shaped answer of a refusal, with its headers (``Connection: close`` for a 408)."""
    return error_response(refusal.status, refusal.message, param=refusal.param, code=refusal.code,
                          headers=refusal.headers() or None)
