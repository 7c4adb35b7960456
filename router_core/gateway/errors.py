"""OpenAI-style error bodies, and the one table mapping RouteLens errors to HTTP.

Every error the gateway returns has the shape ``{"error": {"message", "type", "param", "code"}}``:
those of its routes (:func:`errors_middleware`, which also refuses a header that is not UTF-8
before any route reads it), and those of aiohttp's HTTP parser (:class:`ParseErrorsJson`). Neither
the answer nor the log ever holds the bytes of the request (they may be a credential).

An upstream's 429 is read here too: :func:`retry_after_s` is how long its instance is held out
(the forwarder hands it to the breakers), and :class:`UpstreamRateLimited` the client's 429 when
every attempt was refused so (its ``Retry-After`` the soonest hold, ``x-routelens-instance`` the last
instance tried).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime

import orjson
from aiohttp import web
from aiohttp.http_exceptions import (
    BadStatusLine,
    HttpProcessingError,
    InvalidURLError,
    LineTooLong,
    PayloadEncodingError,
)
from aiohttp.web_protocol import RequestHandler

from router_core.errors import (
    AttemptsExhausted,
    InvalidRequest,
    NoFeasibleInstance,
    RoutingError,
    Throttled,
    UnknownModel,
    UnsupportedEncoding,
)
from router_core.gateway.header_check import HEADER_REFUSAL, coded_body, invalid_header, refusal_of
from schemas.errors import RoutelensError

__all__ = ["ERROR_STATUS", "ERROR_TYPES", "RETRY_AFTER_DEFAULT_S", "RETRY_AFTER_MAX_S", "ParseErrorsJson",
           "ParseErrorsQuiet", "UpstreamRateLimited", "error_for", "error_response", "errors_middleware",
           "retry_after_s", "status_of"]

log = logging.getLogger(__name__)

RETRY_AFTER_DEFAULT_S = 1.0  # the hold of an upstream 429 without a usable Retry-After
RETRY_AFTER_MAX_S = 60.0  # the longest hold an upstream's Retry-After gets (a longer one is cut to this)


def retry_after_s(headers: Mapping[str, str], now: float) -> float:
    """Seconds an upstream's 429 asks to be left alone, within ``[0, RETRY_AFTER_MAX_S]``.

    ``retry-after-ms`` (OpenAI's) first, else ``Retry-After`` in seconds or as an HTTP date
    (``now``: the wall clock, epoch seconds); :data:`RETRY_AFTER_DEFAULT_S` when neither is usable.
    """
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw.strip()) * scale
        except ValueError:
            seconds = math.nan if scale != 1.0 else _date_in(raw, now)
        if math.isfinite(seconds):
            return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)
    return RETRY_AFTER_DEFAULT_S


def _date_in(raw: str, now: float) -> float:
    """Seconds from ``now`` to an HTTP date (nan: not one)."""
    try:
        at = parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return math.nan
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp() - now


class UpstreamRateLimited(Throttled):
    """Every attempt was answered 429, or every instance is held out after one: the client gets a 429 too.

    Attributes:
        retry_after_s: The soonest hold of the instances (sent as ``Retry-After``, whole seconds up).
        instance: The last instance tried (sent as ``x-routelens-instance``; None: none was tried).
    """

    def __init__(self, message: str, *, retry_after_s: float, instance: str | None) -> None:
        super().__init__(message, retry_after_s=retry_after_s)
        self.instance = instance

# HTTP status -> OpenAI `error.type`.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "service_unavailable",
}

# Error class -> (HTTP status, default `error.code`); the most specific class of an error wins.
ERROR_STATUS: dict[type[RoutelensError], tuple[int, str | None]] = {
    UnknownModel: (404, "model_not_found"),
    UnsupportedEncoding: (415, "unsupported_content_encoding"),
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
        if isinstance(exc, UpstreamRateLimited) and exc.instance is not None:
            headers["x-routelens-instance"] = exc.instance
    elif isinstance(exc, AttemptsExhausted) and not exc.retry:  # OpenAI's SDKs read it: no retry of that
        headers = {**(headers or {}), "x-should-retry": "false"}
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
    """Any HTTP error as an OpenAI-shaped body; an unhandled exception as a logged 500, never a crash.

    First of all, a header whose value is not UTF-8 is refused, and a compressed body (see
    :mod:`router_core.gateway.header_check`): with a trace when the app registered a
    :data:`~router_core.gateway.header_check.HEADER_REFUSAL` that takes the request, else plainly.
    A client that goes away while its request is read is not the gateway's fault: a debug line.
    """
    try:
        if (name := invalid_header(request.headers)) is not None:
            return _refuse_header(request, refusal_of(name))
        if (coding := request.headers.get("Content-Encoding")) is not None and (refused := coded_body(coding)):
            return _refuse_header(request, refused)
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None  # a 405 names the methods allowed
        return error_response(exc.status, exc.reason, code=_HTTP_CODES.get(exc.status), headers=allow)
    except Exception as exc:  # the last line of defence: never crash, answer 500
        if isinstance(exc, ConnectionResetError) and _client_gone(request):  # not an upstream's connection
            log.debug("the client of %s %s went away before its answer", request.method, request.path)
            return error_response(400, "the client closed the connection", code="client_disconnected")  # unread
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal error in the RouteLens gateway", code="internal_error")


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}  # aiohttp's own answers


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _refuse_header(request: web.Request, exc: InvalidRequest) -> web.StreamResponse:
    traced = request.config_dict.get(HEADER_REFUSAL)
    answer = traced(request, exc) if traced is not None else None
    return answer if answer is not None else error_for(exc)


class ParseErrorsQuiet(logging.Filter):
    """A request aiohttp cannot parse (a NUL in a header, a bad request line) is the client's fault.

    aiohttp logs it on ``aiohttp.server`` as an ERROR with a traceback, which reads as a gateway
    fault, and the exception's message quotes the offending bytes: the start of an over-long
    ``Authorization`` header (a credential) or of a URL. This filter makes it one WARNING line of
    the status, the exception's type and the peer, and nothing of the request; everything else that
    logger says passes as it is. Install it with :meth:`install` (once).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite a parse error's record in place; keep every record."""
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError) and (exc.code or 0) < 500:
            # aiohttp's own args are the peer address alone ("Error handling request from %s")
            args = record.args if isinstance(record.args, tuple) else ()
            peer = args[0] if len(args) == 1 and isinstance(args[0], str) else "an unknown peer"
            record.msg, record.args = "refused a malformed HTTP request (%s %s) from %s", (exc.code,
                                                                                          type(exc).__name__, peer)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
        return True

    @classmethod
    def install(cls) -> None:
        """Add the filter to ``aiohttp.server`` unless it is there."""
        server = logging.getLogger("aiohttp.server")
        if not any(isinstance(f, cls) for f in server.filters):
            server.addFilter(cls())


# What a parse error's answer says: by the exception's class, never its message (which quotes the request).
_PARSE_ERRORS: tuple[tuple[type[HttpProcessingError], str], ...] = (
    (LineTooLong, "the request line or a header line is longer than the gateway accepts"),
    (BadStatusLine, "the request line is not HTTP/1.x (TLS sent to a plain-HTTP port?)"),
    (InvalidURLError, "the request's target is not a valid URL"),
    (PayloadEncodingError, "the request body's framing or encoding is malformed"),
)
_AIOHTTP_HANDLE_ERROR = RequestHandler.handle_error


def _json_handle_error(
    self: RequestHandler, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
    message: str | None = None,
) -> web.StreamResponse:
    """The ``handle_error`` of aiohttp, answering a parse error in OpenAI's JSON (see :class:`ParseErrorsJson`)."""
    answer = _AIOHTTP_HANDLE_ERROR(self, request, status, exc, message)  # logs as aiohttp does, closes the connection
    if not isinstance(exc, HttpProcessingError) or not 400 <= status < 500:
        return answer
    what = next((text for cls, text in _PARSE_ERRORS if isinstance(exc, cls)),
                "the request is not well-formed HTTP/1.1 (a malformed header or request line)")
    response = error_response(status, what, code="invalid_http")
    response.force_close()  # the stream's framing is lost: nothing more can be read from it
    return response


class ParseErrorsJson:
    """Parse errors answered in OpenAI's shape: ``{"error": {..., "code": "invalid_http"}}``, no request bytes.

    A request aiohttp's HTTP parser refuses (a control character in a header, a line over 64 KiB,
    a duplicate ``Content-Type``, TLS bytes) never reaches the application or its middlewares:
    ``RequestHandler.handle_error`` answers it, as ``text/plain`` echoing the offending bytes.
    aiohttp has no per-application hook for that answer (aio-libs/aiohttp#3287, open since 2018),
    so :meth:`install` replaces the method on the class, for every server of the process: the
    gateway's process serves RouteLens applications only. Other errors keep aiohttp's answer,
    and the logging stays aiohttp's (made one line by :class:`ParseErrorsQuiet`, installed too).
    """

    @staticmethod
    def install() -> None:
        """Answer parse errors as JSON from now on (idempotent), and log them as one line."""
        ParseErrorsQuiet.install()
        if RequestHandler.handle_error is not _json_handle_error:
            setattr(RequestHandler, "handle_error", _json_handle_error)  # noqa: B010  (mypy: no method assignment)
