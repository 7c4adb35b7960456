"""OpenAI-style error bodies, and the one table mapping RouteLens errors to HTTP.

Every error the gateway returns has the shape ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from router_core.errors import (
    AttemptsExhausted,
    InvalidRequest,
    NoFeasibleInstance,
    RoutingError,
    Throttled,
    UnknownModel,
)
from schemas.errors import RoutelensError

__all__ = ["ERROR_STATUS", "ERROR_TYPES", "ParseErrorsQuiet", "error_for", "error_response", "errors_middleware",
           "status_of"]

log = logging.getLogger(__name__)

# HTTP status -> OpenAI `error.type`.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "service_unavailable",
}

# Error class -> (HTTP status, default `error.code`); the most specific class of an error wins.
ERROR_STATUS: dict[type[RoutelensError], tuple[int, str | None]] = {
    UnknownModel: (404, "model_not_found"),
    InvalidRequest: (400, "invalid_request"),
    NoFeasibleInstance: (503, "no_feasible_instance"),
    Throttled: (429, "rate_limit_exceeded"),
    AttemptsExhausted: (502, "all_attempts_failed"),
    RoutingError: (503, "routing_failed"),
}


def status_of(exc: RoutelensError) -> tuple[int, str | None]:
    """Return the HTTP status and ``error.code`` for ``exc`` (its own ``code`` when it has one)."""
    for cls in type(exc).__mro__:
        if cls in ERROR_STATUS:
            status, code = ERROR_STATUS[cls]
            return status, getattr(exc, "code", None) or code
    return 500, "internal_error"


def error_for(exc: RoutelensError, *, headers: dict[str, str] | None = None) -> web.Response:
    """The OpenAI-style response for a RouteLens error, through :data:`ERROR_STATUS`."""
    status, code = status_of(exc)
    if isinstance(exc, Throttled):
        headers = {**(headers or {}), "Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    return error_response(status, str(exc), param=getattr(exc, "param", None), code=code, headers=headers)


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


@web.middleware
async def errors_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Any HTTP error as an OpenAI-shaped body; an unhandled exception as a logged 500, never a crash."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason)
    except Exception:  # the last line of defence: never crash, answer 500
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal error in the RouteLens gateway", code="internal_error")


class ParseErrorsQuiet(logging.Filter):
    """A request aiohttp cannot parse (a NUL in a header, a bad request line) is the client's fault.

    aiohttp answers it 400 itself and logs it on ``aiohttp.server`` as an ERROR with a traceback,
    which reads as a gateway fault. This filter makes it one WARNING line naming the problem;
    everything else that logger says passes as it is. Install it with :meth:`install` (once).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite a parse error's record in place; keep every record."""
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError) and (exc.code or 0) < 500:
            first = str(exc.message).strip().splitlines()[0] if exc.message else type(exc).__name__
            record.msg, record.args = "refused a malformed HTTP request (%s %s): %s", (exc.code, type(exc).__name__,
                                                                                        first)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
        return True

    @classmethod
    def install(cls) -> None:
        """Add the filter to ``aiohttp.server`` unless it is there."""
        server = logging.getLogger("aiohttp.server")
        if not any(isinstance(f, cls) for f in server.filters):
            server.addFilter(cls())
