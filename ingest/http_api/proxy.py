"""The store's HTTP API as a gateway serves it: every route forwarded to the store process.

Clients keep one address (the gateway's) for chat, feedback and the trace API alike. A lookup of
one trace answers from the gateway's own pending traces first (read-your-writes before the relay
has delivered them), then from the store, then (with several workers) from another worker's
pending traces. A read of a request's feedback first has the gateway deliver what it holds
(``settle``), so a verdict posted through it is read back at once. A body is read as the
gateway's own routes read theirs: within the gateway's body timeout (408), and refused at once
when its ``Content-Length`` is over the gateway's limit (413), so a client cannot hold a
connection and a handler by never finishing it. The store's own pipeline series (what it wrote,
quarantined, failed to write, holds in its spool) can be republished on the gateway's
``/metrics`` as ``routelens_store_*`` (:func:`store_series`): Prometheus scrapes the gateway only.
"""

from __future__ import annotations

import asyncio
import hmac
import io
from collections.abc import Awaitable, Callable

import aiohttp
import orjson
from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from ingest.http_api.answers import error_response
from ingest.http_api.routes import FEEDBACK_PATH, INTAKE_PATH, READ_ROUTES
from schemas.trace import DecisionTrace

__all__ = ["STORE_ROUTES", "STORE_TIMEOUT_S", "add_store_proxy", "read_body", "store_series"]

_RAW_MAX = 1 << 20  # aiohttp's bound for a body given as bytes
STORE_TIMEOUT_S = 60.0  # a forwarded request's answer from the store: a long analytics query is still served

# (method, path) of every route of ingest.http_api.routes.IngestApi
STORE_ROUTES = (("POST", INTAKE_PATH), *(("GET", path) for path, _ in READ_ROUTES))
_PASSED_HEADERS = ("Authorization", "Content-Type", "Accept")


def store_series(text: bytes) -> bytes:
    """The store's exposition with each ``routelens_*`` family renamed ``routelens_store_*``.

    The store's pipeline series have the gateway's own names (``routelens_records_written_total``
    is both what a gateway relayed and what the store wrote); renamed, they sit beside them in one
    exposition. Other lines (comments, other families) are left out.
    """
    out = []
    for line in text.splitlines(keepends=True):
        head = line[:7] if line.startswith((b"# HELP ", b"# TYPE ")) else b""
        name = line[len(head):]
        if name.startswith(b"routelens_"):
            out.append(head + b"routelens_store_" + name[len(b"routelens_"):])
    return b"".join(out)


async def read_body(request: web.Request, timeout_s: float, limit: int | None = None) -> bytes | web.Response:
    """The body, or the answer when it does not arrive within ``timeout_s`` (408, closing the connection).

    The same rule as the gateway's own routes (``router_core.gateway.body_read``, which ingest
    may not import); the store's relay route reads with it too (:mod:`ingest.http_api.relay`).
    ``limit``: the largest body taken (None: the application's ``client_max_size``).

    Raises:
        web.HTTPRequestEntityTooLarge: The body is over the limit; when its ``Content-Length`` says
            so, before any of it is read.
    """
    cap = request.client_max_size if limit is None else limit
    size = request.content_length
    if size is not None and size > cap:
        raise web.HTTPRequestEntityTooLarge(cap, size)
    if request.content.is_eof():  # the ordinary request: the whole body came with the headers
        return await _read(request, cap)
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(request, cap)
    except TimeoutError:
        answer = error_response(408, f"the request body did not arrive within {timeout_s:g} s", "request_timeout")
        answer.force_close()  # its rest may still come, and would read as the next request
        return answer


async def _read(request: web.Request, cap: int) -> bytes:
    if cap == request.client_max_size:
        return await request.read()  # aiohttp counts against client_max_size itself
    body = bytearray()
    async for chunk in request.content.iter_chunked(1 << 16):  # a chunked body has no Content-Length to refuse
        body += chunk
        if len(body) > cap:
            raise web.HTTPRequestEntityTooLarge(cap, len(body))
    return bytes(body)


_BOOL: TypeAdapter[bool] = TypeAdapter(bool)  # a query string's boolean, read as the store's FeedbackQuery reads it


def _settles(request: web.Request) -> bool:
    """``GET /v1/feedback``'s ``settle`` (true unless given false).

    A bad value is the store's 400 to answer, and so is ``settle`` given twice: nothing is
    delivered first for a request the store refuses.
    """
    given = request.query.getall("settle", ["true"])
    if len(given) > 1:
        return False
    try:
        return _BOOL.validate_python(given[0])
    except ValidationError:
        return True


def add_store_proxy(app: web.Application, store_url: str,
                    pending: Callable[[str], DecisionTrace | None], *,
                    read_token: str | None = None,
                    elsewhere: Callable[[str], Awaitable[DecisionTrace | None]] | None = None,
                    body_timeout_s: float = 30.0,
                    intake_max_bytes: int | None = None,
                    store_timeout_s: float = STORE_TIMEOUT_S,
                    settle: Callable[[], Awaitable[object]] | None = None) -> Callable[[], Awaitable[bytes]]:
    """Mount the store's routes on ``app``, forwarded to ``store_url``.

    Args:
        app: The gateway's application.
        store_url: The store process, e.g. ``http://127.0.0.1:8090``.
        pending: The gateway's own not-yet-delivered traces by request id.
        read_token: The store's read token: a pending trace is answered here only to a caller that
            sends it (the store checks every forwarded request itself).
        elsewhere: The other workers' not-yet-delivered traces by request id, asked only when
            neither ``pending`` nor the store has the trace (the store is then asked once more:
            a worker forgets a pending trace once the store has it).
        body_timeout_s: How long a body may take to arrive once its headers have
            (``gateway.body_timeout_s``).
        intake_max_bytes: The largest ``POST /v1/traces`` body forwarded (``storage.intake_max_bytes``,
            as the store takes; None: the gateway's own limit, as for every other route).
        store_timeout_s: How long the store may take to answer a forwarded request (503
            ``store_unavailable`` past it, saying so).
        settle: Awaited before ``GET /v1/feedback`` is forwarded: delivers what this gateway has not
            relayed yet (its verdicts wait for the next relay, ``storage.flush_interval_ms``), so a
            verdict posted through this process is there when read back (read-your-writes).

    Returns:
        A reader of the store's series for the gateway's ``/metrics`` (:func:`store_series`;
        empty when the store does not answer within a second).
    """
    base = store_url.rstrip("/")
    session: dict[str, aiohttp.ClientSession] = {}

    async def start(_: web.Application) -> None:
        session["s"] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=store_timeout_s, sock_connect=2))

    async def stop(_: web.Application) -> None:
        await session["s"].close()

    async def forward(request: web.Request) -> web.Response:
        rid = request.match_info.get("request_id") if request.method == "GET" else None
        allowed = False
        if rid is not None:
            given = request.headers.get("Authorization", "").encode()
            allowed = read_token is None or hmac.compare_digest(given, f"Bearer {read_token}".encode())
            if allowed and (trace := pending(rid)) is not None:
                return _trace(trace)
        if settle is not None and request.method == "GET" and request.path == FEEDBACK_PATH and _settles(request):
            await settle()
        data = None
        if request.can_read_body:
            intake = request.method == "POST" and request.path == INTAKE_PATH
            got = await read_body(request, body_timeout_s, intake_max_bytes if intake else None)
            if isinstance(got, web.Response):
                return got
            data = got
        answer = await relay(request, data)
        if allowed and elsewhere is not None and rid is not None and _not_found(answer):
            if (trace := await elsewhere(rid)) is not None:
                return _trace(trace)
            answer = await relay(request, data)
        return answer

    async def relay(request: web.Request, data: bytes | None) -> web.Response:
        headers = {h: request.headers[h] for h in _PASSED_HEADERS if h in request.headers}
        # aiohttp sends a body over 1 MiB given as bytes but warns it may hold the loop: a stream goes in parts
        payload = io.BytesIO(data) if data is not None and len(data) > _RAW_MAX else data
        try:
            async with session["s"].request(request.method, base + request.rel_url.raw_path_qs, headers=headers,
                                            data=payload) as up:
                body = await up.read()
                return web.Response(status=up.status, body=body, content_type=up.content_type)
        except (aiohttp.ClientError, TimeoutError) as exc:
            # the total timeout's TimeoutError has no text: the answer said "unreachable: " and nothing more
            why = str(exc) or (f"no answer within {store_timeout_s:g} s" if isinstance(exc, TimeoutError)
                               else type(exc).__name__)
            return error_response(503, f"the trace store is unreachable: {why}", "store_unavailable")

    async def metrics() -> bytes:
        if "s" not in session:
            return b""
        try:
            async with session["s"].get(f"{base}/metrics", timeout=aiohttp.ClientTimeout(total=1.0)) as up:
                return store_series(await up.read()) if up.status == 200 else b""
        except (aiohttp.ClientError, TimeoutError):
            return b""

    for method, path in STORE_ROUTES:
        app.router.add_route(method, path, forward)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return metrics


def _trace(trace: DecisionTrace) -> web.Response:
    return web.Response(body=trace.model_dump_json(), content_type="application/json")


def _not_found(answer: web.Response) -> bool:
    """The store's 404 for an unknown request id (not a 400 for a malformed one, nor a 503)."""
    if answer.status != 404 or not isinstance(answer.body, bytes):
        return False
    try:
        error = orjson.loads(answer.body).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return isinstance(error, dict) and error.get("code") == "trace_not_found"
