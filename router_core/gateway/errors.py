"""OpenAI-style error bodies: every error the gateway returns has this shape."""

from __future__ import annotations

import orjson
from aiohttp import web

__all__ = ["ERROR_TYPES", "error_response"]

# HTTP status -> OpenAI `error.type`, one table for the whole gateway.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    500: "server_error",
    502: "upstream_error",
    503: "service_unavailable",
}


def error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """Build ``{"error": {"message", "type", "param", "code"}}`` with ``status``."""
    body = {
        "error": {
            "message": message,
            "type": ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error"),
            "param": param,
            "code": code,
        }
    }
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )
