r"""Relaying records from a serving process to the store process, over loopback HTTP.

A gateway keeps no database of its own: its pipeline's sink is a :class:`RelaySink`, which posts
each batch of already-encoded records to the store process (``routelens store``). The store
appends them to its own durable spool and answers then, so the gateway's spool holds every record
until the store's spool has it (nothing is lost when either restarts: each replays its spool).
The store writes on its own interval (``storage.store_flush_interval_ms``): DuckDB's fixed cost per
insert is paid once per larger batch, and the gateway's cadence is not tied to the store's writes.
A trace the gateway stops calling pending is readable from the store at once: a lookup of one not
written yet writes what waits first (:meth:`ingest.http_api.routes.IngestApi.trace`). The store's
writer (DuckDB, and its Arrow registration, which holds the GIL for milliseconds per batch) runs in
another process than the requests.

Wire format: ``POST /v1/internal/records``; the body holds one record per line,
``<kind number>\t<payload JSON>\n`` (payloads are single-line JSON); the answer is
``{"accepted": {"<kind>": n, ...}}`` with status 200 once they are on disk in the store's spool (a
full spool makes the post wait, which holds the gateway's records in its own spool). A store whose
spool cannot take them (its disk full or unwritable) answers 503 ``spool_unavailable`` and keeps
none of them in memory: a 200 makes the gateway forget its own copy, so it is never given for
records a crash of the store would lose. A post that fails or is refused is retried by the
gateway's batcher with backoff, its records kept in its own spool meanwhile, and ids make the
retry idempotent (records of a refused post that the store had spooled come again as duplicates).
The body is read as every other route's (:func:`ingest.http_api.proxy.read_body`):
one that has not arrived ``body_timeout_s`` after the headers is answered 408 and the connection closed, so
a caller that never finishes its body does not hold a connection and a handler for good.
"""

from __future__ import annotations

import asyncio
import functools
import http.client
import urllib.parse
from typing import TYPE_CHECKING

import aiohttp
import orjson
from aiohttp import web

from ingest.errors import SinkUnavailable, SpoolUnavailable
from ingest.http_api.answers import error_response
from ingest.http_api.proxy import read_body
from ingest.kinds import Kind
from ingest.record_sink import PreparedBatch, RecordBatch, WriteResult

if TYPE_CHECKING:
    from ingest.pipeline.emitter import TraceEmitter

__all__ = ["RELAY_PATH", "RelaySink", "add_relay_route"]

RELAY_PATH = "/v1/internal/records"
_KINDS = {str(int(k)).encode(): k for k in Kind}


class RelaySink:
    """A :class:`ingest.record_sink.RecordSink` that hands batches to the store process.

    Args:
        base_url: The store process, e.g. ``http://127.0.0.1:8090``.
        token: Bearer token the store's relay route requires (None: none).
        timeout_s: Bound on one post (the store answers once the batch is in its spool).
    """

    def __init__(self, base_url: str, *, token: str | None = None, timeout_s: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._netloc = parts.netloc or f"{self._host}:{self._port}"
        self._headers = {"Content-Type": "text/plain"} | ({"Authorization": f"Bearer {token}"} if token else {})
        self._timeout = timeout_s
        self._conn: http.client.HTTPConnection | None = None  # the writer thread's alone

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        """Nothing to prepare: the payloads travel as they are."""
        return PreparedBatch(batch)

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Post the batch; raise :class:`SinkUnavailable` when the store does not take it."""
        body = b"".join(b"%d\t%s\n" % (kind, payload) for kind, items in prepared.batch.payloads.items()
                        for payload in items)
        try:
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            self._conn.request("POST", RELAY_PATH, body=body, headers=self._headers)
            resp = self._conn.getresponse()
            answer = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise SinkUnavailable(f"the store at {self._host}:{self._port} is unreachable: {exc}") from exc
        if resp.status != 200:
            raise SinkUnavailable(f"the store at {self._host}:{self._port} answered HTTP {resp.status}: "
                                  f"{_message_of(answer)}")
        result = WriteResult()
        for kind, items in prepared.batch.payloads.items():  # duplicates are the store's to count
            result.count(Kind.TRACE if kind is Kind.TRACE_UNCHECKED else kind, len(items), 0)  # stored as traces
        return result

    async def store_problem(self, timeout_s: float = 2.0) -> str | None:
        """Why the store is not taking what is relayed (for the gateway's ``/health``), or None.

        Asks the store's ``/health`` (no token): unreachable, silent for ``timeout_s``, or 503
        with its reason (its spool unavailable, its writes failing) is a problem. Awaited on the
        event loop; the writer thread's connection is not touched.
        """
        where = f"the trace store at {self._host}:{self._port}"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session, \
                    session.get(f"http://{self._netloc}/health") as resp:
                body = await resp.read()
        except TimeoutError:
            return f"{where} did not answer /health within {timeout_s:g}s"
        except aiohttp.ClientError as exc:
            return f"{where} is unreachable ({type(exc).__name__}: {exc})"
        if resp.status == 200:
            return None
        try:
            reason = orjson.loads(body).get("reason")
        except (orjson.JSONDecodeError, AttributeError):
            reason = None
        return f"{where} reports: {reason}" if isinstance(reason, str) and reason else \
            f"{where} answered /health with HTTP {resp.status}"

    def idle(self) -> None:
        """Nothing deferred."""

    def close(self) -> None:
        """Drop the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _message_of(answer: bytes) -> str:
    """The error message of a store's JSON answer, else the start of the body."""
    try:
        message = orjson.loads(answer)["error"]["message"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return repr(answer[:200])
    return str(message)[:300]


def parse_relayed(body: bytes) -> list[tuple[Kind, bytes]]:
    """Split a relay body into ``(kind, payload)``; raise ValueError on a malformed line."""
    out = []
    for number, line in enumerate(body.split(b"\n"), 1):
        if not line:
            continue
        head, tab, payload = line.partition(b"\t")
        kind = _KINDS.get(head)
        if kind is None or not tab or not payload.startswith(b"{"):
            raise ValueError(f"line {number} is not '<kind>\\t<json>'")
        out.append((kind, payload))
    return out


def add_relay_route(app: web.Application, emitter: TraceEmitter, *, token: str | None = None,
                    body_timeout_s: float = 30.0) -> None:
    """Mount ``POST /v1/internal/records`` on the store's application.

    Args:
        app: The store's (or a serving process's) application.
        emitter: Where the relayed records go (its spool holds them once the route answers 200;
            503 ``spool_unavailable`` when it cannot, and none of them is kept in memory).
        token: Bearer token the route requires (None: none).
        body_timeout_s: How long a body may take to arrive once its headers have (408 past it;
            ``gateway.body_timeout_s``, as the store's other routes).
    """

    async def relay(request: web.Request) -> web.Response:
        if token is not None and request.headers.get("Authorization") != f"Bearer {token}":
            return error_response(401, "relay token required", "invalid_api_key")
        body = await read_body(request, body_timeout_s)
        if isinstance(body, web.Response):
            return body
        try:
            records = parse_relayed(body)
        except ValueError as exc:
            return error_response(400, str(exc), "invalid_relay_body")
        try:  # durable in the store's spool once it returns; never held in memory only
            await asyncio.to_thread(functools.partial(emitter.emit_encoded, records, durable=True))
        except SpoolUnavailable as exc:
            return error_response(503, f"the store's spool cannot take the records ({exc}); none was kept: "
                                  "send them again later", "spool_unavailable")
        counts: dict[str, int] = {}
        for kind, _ in records:
            counts[kind.name.lower()] = counts.get(kind.name.lower(), 0) + 1
        return web.Response(body=orjson.dumps({"accepted": counts}), content_type="application/json")

    app.router.add_post(RELAY_PATH, relay)
