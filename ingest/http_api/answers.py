"""What the store's HTTP API answers besides its routes' own data: errors in OpenAI's shape, JSON, the parser's limits.

Shared by the routes (:mod:`ingest.http_api.routes`), the relay route and the gateway's proxy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from pydantic import BaseModel

__all__ = ["SERVER_LIMITS", "error_response", "http_errors", "json_response"]

# The HTTP parser's line and header limits for the server that mounts these routes (aiohttp's
# ``handler_args``). Its defaults (8 KiB) refuse a longer URL or header before any route runs,
# in plain text and with a traceback in the log; up to these limits the routes answer themselves.
# Bodies are read as sent: aiohttp would inflate a compressed one on the event loop as it arrives (1 MB of gzip is
# 1 GiB), before any route could refuse it; the gateway answers a compressed body 415 (router_core header_check).
SERVER_LIMITS: dict[str, Any] = {"max_line_size": 64 * 1024, "max_field_size": 64 * 1024, "auto_decompress": False}


def error_response(status: int, message: str, code: str, param: str | None = None) -> web.Response:
    """The store API's errors in OpenAI's shape (``service_unavailable`` for 5xx), for routes, relay and proxy."""
    kind = "invalid_request_error" if status < 500 else "service_unavailable"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")



_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}  # aiohttp's own answers
_MAX_NAME = 64  # of a header's name in a message


def _not_utf8(request: web.Request) -> str | None:
    """The name of the first header whose value is not UTF-8 (aiohttp keeps such bytes as lone surrogates)."""
    for name, value in request.headers.items():
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return name[:_MAX_NAME]
    return None


@web.middleware
async def http_errors(request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """The refusals aiohttp makes itself (an unknown route, a wrong method, a body too large) in the API's JSON.

    A store process's routes answered them as ``text/plain``, which the gateway's proxy passed on.
    Refused first, as the gateway refuses them (``router_core.gateway.header_check``, which ingest may
    not import): a header value that is not UTF-8 (400 ``invalid_header``; a token check encoding it
    was a 500 with a traceback), and a compressed body (415 ``unsupported_content_encoding``: bodies are
    read as sent, and a gzip body sent to ``POST /v1/traces`` was quarantined line by line as JSON).
    """
    if (bad := _not_utf8(request)) is not None:
        return error_response(400, f"the value of header {bad} is not valid UTF-8", "invalid_header", bad)
    coding = request.headers.get("Content-Encoding", "").strip()
    if coding.lower() not in ("", "identity"):
        return error_response(415, f"request bodies are read as sent: send it uncompressed "
                              f"(Content-Encoding: {coding[:_MAX_NAME]})", "unsupported_content_encoding",
                              "Content-Encoding")
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        answer = error_response(exc.status, exc.reason, _HTTP_CODES.get(exc.status, "http_error"))
        if "Allow" in exc.headers:  # a 405 names the methods allowed
            answer.headers["Allow"] = exc.headers["Allow"]
        return answer


def json_response(data: Any, status: int = 200) -> web.Response:
    """``data`` as JSON (pydantic models as their JSON form)."""

    def plain(obj: Any) -> Any:
        if isinstance(obj, BaseModel):
            return obj.model_dump(mode="json")
        raise TypeError(type(obj).__name__)

    return web.Response(status=status, body=orjson.dumps(data, default=plain), content_type="application/json")
