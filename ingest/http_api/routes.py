"""The store's whole HTTP API, mounted on the server's aiohttp application.

===========================  ===============================================================
``POST /v1/traces``          intake: NDJSON or a JSON array of traces; per-line verdicts
``GET /v1/traces``           search (filters as query parameters; ``limit``, ``cursor``)
``GET /v1/traces/{id}``      one trace, emitted ones not yet stored included (read-your-writes)
``GET /v1/policies/{hash}``  the policy stored under a trace's ``policy_hash``
``GET /v1/analytics/buckets`` per time bucket: requests, latency quantiles, fallback, cost, misroutes
``GET /v1/analytics/traffic`` requests along rule -> model -> instance
``GET /v1/analytics/constraints`` per (constraint, instance, model): removals, decisive, soft
``GET /v1/analytics/misroutes`` feedback saying the routing was wrong, with its trace (``limit``)
``GET /v1/feedback``         every verdict on one request (``request_id``), correct or not
``GET /v1/analytics/compare`` two arms, versions or policies (``a``, ``b``, ``by``, ``start``, ``end``, ``shares``)
``GET /v1/analytics/groups`` requests per arm, version or policy in a window (``by``, ``start``, ``end``)
``GET /v1/analytics/latches`` latch out-intervals from the snapshots (``start``, ``end``, ``instance``)
``GET /v1/probes``           probe results (``start``, ``end``, ``instance``)
``GET /v1/events``           router events (``start``, ``end``, ``kind``)
``GET /v1/snapshots``        instance snapshots (``start``, ``end``, ``instance``)
``GET /v1/quarantine``       quarantined records (``start``, ``end``)
===========================  ===============================================================

Filters: ``start``/``end`` (ISO 8601 with a zone), ``router_version``, ``experiment_arm``,
``rule``, ``model``, ``instance``, ``fallback`` (true/false), ``outcome`` (ok/error),
``query_hash``, ``otel_trace_id`` (the W3C trace id the request carried or began, 32 hex),
``min_latency_ms``/``max_latency_ms`` (the gateway's total time, ms; the
maximum is exclusive), ``violation`` (a constraint a candidate violated). Each route validates its
query string with its model in :mod:`ingest.http_api.params` (also its ``/openapi.json``).
Errors are OpenAI-shaped ``{"error": {"message", "type", "param", "code"}}``; an unknown trace id
is a 404 with the code ``trace_not_found``, and an id longer than the contract's 128 characters a
400 ``invalid_request_id``. An intake request logs one line, however many of its records are
quarantined (the quarantine's own per-record lines are held back for it).

Tokens: ``POST /v1/traces`` requires ``Authorization: Bearer <storage.intake_token_env>`` and every
GET route ``Bearer <storage.read_token_env>`` when one is set (401 ``invalid_api_key`` otherwise);
an unset read token leaves the queries open, which ``app/`` allows on a loopback address only.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Middleware
from pydantic import BaseModel, ValidationError

from ingest.experiments.compare import assumed_even_split
from ingest.http_api.openapi import (
    BucketsAnswer,
    ConstraintsAnswer,
    EventsAnswer,
    FeedbackAnswer,
    GroupsAnswer,
    MisroutesAnswer,
    ProbesAnswer,
    QuarantineAnswer,
    SnapshotsAnswer,
    TrafficAnswer,
)
from ingest.http_api.params import (
    BadParam,
    BucketsQuery,
    EventsQuery,
    FeedbackQuery,
    GroupsQuery,
    LatchesQuery,
    MisroutesQuery,
    ProbesQuery,
    QuarantineQuery,
    SearchQuery,
    SnapshotsQuery,
    query_of,
)
from ingest.intake.lines import LineResult, split_records, take_records
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import describe_validation_error
from ingest.trace_store import BadCursor, TraceStore
from schemas.experiments import CompareQuery
from schemas.feedback import Feedback
from schemas.queries import AggregateQuery, TraceFilter
from schemas.trace import DecisionTrace

__all__ = ["INTAKE_PATH", "READ_ROUTES", "SERVER_LIMITS", "IngestApi", "http_errors"]

# The HTTP parser's line and header limits for the server that mounts these routes (aiohttp's
# ``handler_args``). Its defaults (8 KiB) refuse a longer URL or header before any route runs,
# in plain text and with a traceback in the log; up to these limits the routes answer themselves.
# Bodies are read as sent: aiohttp would inflate a compressed one on the event loop as it arrives (1 MB of gzip is
# 1 GiB), before any route could refuse it; the gateway answers a compressed body 415 (router_core header_check).
SERVER_LIMITS: dict[str, Any] = {"max_line_size": 64 * 1024, "max_field_size": 64 * 1024, "auto_decompress": False}

INTAKE_PATH = "/v1/traces"  # POST: traces from other routers or other gateways
# GET path -> the IngestApi method answering it: every read route, here once (the gateway's proxy forwards these)
READ_ROUTES = (
    ("/v1/traces", "search"), ("/v1/traces/{request_id}", "trace"),
    ("/v1/analytics/buckets", "buckets"), ("/v1/analytics/traffic", "traffic"),
    ("/v1/analytics/constraints", "constraints"), ("/v1/analytics/misroutes", "misroutes"),
    ("/v1/feedback", "feedback"),
    ("/v1/analytics/compare", "compare"), ("/v1/analytics/groups", "groups"),
    ("/v1/analytics/latches", "latches"),
    ("/v1/probes", "probes"), ("/v1/events", "events"), ("/v1/snapshots", "snapshots"),
    ("/v1/quarantine", "quarantined"), ("/v1/policies/{policy_hash}", "policy"),
)
_FILTERS = set(TraceFilter.model_fields)
_MAX_ID = 128  # DecisionTrace.request_id's max_length: no longer id can have a trace
_LOOKUP_FLUSH_S = 10.0  # a trace lookup waits this long at most for the records waiting to be written
log = logging.getLogger(__name__)


class _HeldBack(logging.Filter):
    """Drops the quarantine's per-record lines while this thread takes an intake body."""

    local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.local, "holding", False)


logging.getLogger("ingest.pipeline.quarantine").addFilter(_HeldBack())


@contextmanager
def _one_line() -> Iterator[None]:
    _HeldBack.local.holding = True
    try:
        yield
    finally:
        _HeldBack.local.holding = False
Handler = Callable[[web.Request], Awaitable[web.Response]]


def error_response(status: int, message: str, code: str, param: str | None = None) -> web.Response:
    """The store API's errors in OpenAI's shape (``service_unavailable`` for 5xx), for routes, relay and proxy."""
    kind = "invalid_request_error" if status < 500 else "service_unavailable"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")



_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}  # aiohttp's own answers


@web.middleware
async def http_errors(request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """The refusals aiohttp makes itself (an unknown route, a wrong method, a body too large) in the API's JSON.

    A store process's routes answered them as ``text/plain``, which the gateway's proxy passed on.
    """
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        answer = error_response(exc.status, exc.reason, _HTTP_CODES.get(exc.status, "http_error"))
        if "Allow" in exc.headers:  # a 405 names the methods allowed
            answer.headers["Allow"] = exc.headers["Allow"]
        return answer


def _json(data: Any, status: int = 200) -> web.Response:
    def plain(obj: Any) -> Any:
        if isinstance(obj, BaseModel):
            return obj.model_dump(mode="json")
        raise TypeError(type(obj).__name__)

    return web.Response(status=status, body=orjson.dumps(data, default=plain), content_type="application/json")


def _trace_filter(q: TraceFilter) -> TraceFilter:
    """The trace filter a route's query model carries (its own extra fields left out)."""
    return TraceFilter.model_validate(q.model_dump(include=_FILTERS, exclude_unset=True))


def _filter(request: web.Request) -> TraceFilter:
    raw = {k: v for k, v in request.query.items() if k in _FILTERS}
    try:
        return TraceFilter.model_validate(raw)
    except ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        raise BadParam(str(loc[0]) if loc else "query", describe_validation_error(exc)) from exc


_COMPARE = {"a", "b", "by", "min_samples", "confidence", "alpha", "replicates", "seed"}


def _time(request: web.Request, name: str) -> datetime:
    """Return the required ISO 8601 time ``name`` (``start`` or ``end``); it must carry a zone."""
    value = request.query.get(name)
    if value is None:
        raise BadParam(name, f"{name} is required")
    try:
        ts = datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadParam(name, f"{name} is not an ISO 8601 time") from exc
    if ts.tzinfo is None:
        raise BadParam(name, f"{name} must carry a time zone")
    return ts


class IngestApi:
    """The intake and the query API.

    Args:
        emitter: Where accepted traces go (and refused ones are quarantined).
        store: Answers the queries.
        token: Bearer token ``POST /v1/traces`` requires; None leaves it open.
        max_body: Largest intake body, in bytes.
        read_token: Bearer token the GET routes require; None leaves them open.
        body_timeout_s: How long an intake body may take to arrive once its headers have (408 past it,
            as the gateway's routes answer: a body that never completes would hold the connection).
    """

    def __init__(
        self, emitter: TraceEmitter, store: TraceStore, *, token: str | None = None, max_body: int = 64 << 20,
        read_token: str | None = None, body_timeout_s: float = 30.0,
    ) -> None:
        self.emitter = emitter
        self.store = store
        self.token = token
        self.read_token = read_token
        self.max_body = max_body
        self.body_timeout_s = body_timeout_s

    @staticmethod
    def intake_limit(max_bytes: int) -> Middleware:
        """A middleware giving ``POST /v1/traces`` the limit ``max_bytes`` (``storage.intake_max_bytes``).

        For the gateway, whose ``client_max_size`` is its chat route's (32 MiB) and bounded the intake
        it forwards to a store (:func:`ingest.http_api.proxy.read_body`). Other routes keep the app's limit.
        """

        @web.middleware
        async def limit(request: web.Request,
                        handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
            if request.method == "POST" and request.path == INTAKE_PATH and request.client_max_size != max_bytes:
                request = request.clone(client_max_size=max_bytes)
            return await handler(request)

        return limit

    def add_routes(self, app: web.Application) -> None:
        """Mount every route on ``app``."""
        app.router.add_post(INTAKE_PATH, self.intake)
        for path, name in READ_ROUTES:
            app.router.add_get(path, self.guarded(getattr(self, name)))

    def guarded(self, handler: Handler) -> Handler:
        """``handler`` behind the read token, with bad parameters answered as OpenAI-shaped 400s."""

        async def run(request: web.Request) -> web.Response:
            if self.read_token is not None and not hmac.compare_digest(
                request.headers.get("Authorization", "").encode(), f"Bearer {self.read_token}".encode()
            ):
                return error_response(401, "a valid read token is required: send 'Authorization: Bearer <token>'",
                              "invalid_api_key")
            try:
                return await handler(request)
            except BadParam as exc:
                return error_response(400, str(exc), "invalid_parameter", exc.param)
            except BadCursor as exc:
                return error_response(400, str(exc), "invalid_cursor", "cursor")

        return run

    # -- intake ---------------------------------------------------------------------------------
    async def intake(self, request: web.Request) -> web.Response:
        """Validate and queue traces; answer which lines were accepted and which were refused."""
        if self.token is not None:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return error_response(401, "a valid bearer token is required", "unauthorized")
        if (request.content_length or 0) > self.max_body:  # announced: refused before any of it is read
            return error_response(413, f"body exceeds {self.max_body} bytes", "body_too_large")
        body = bytearray()
        try:
            async with asyncio.timeout(None if request.content.is_eof() else self.body_timeout_s):
                async for chunk in request.content.iter_chunked(1 << 16):
                    body += chunk
                    if len(body) > self.max_body:
                        return error_response(413, f"body exceeds {self.max_body} bytes", "body_too_large")
        except TimeoutError:
            late = error_response(408, f"the request body did not arrive within {self.body_timeout_s:g} s",
                                  "request_timeout")
            late.force_close()  # its rest may still come, and would read as the next request
            return late
        if not body.strip():
            return error_response(400, "empty body: send NDJSON or a JSON array of traces", "empty_body")
        results = await asyncio.to_thread(self._take, bytes(body))
        accepted = [{"line": r.line, "request_id": r.request_id} for r in results if r.trace is not None]
        rejected = [{"line": r.line, "request_id": r.request_id, "reason": r.reason}
                    for r in results if r.trace is None]
        status = 200 if not rejected else (207 if accepted else 422)
        return _json({"accepted": len(accepted), "rejected": len(rejected),
                      "results": {"accepted": accepted, "rejected": rejected}}, status)

    def _take(self, body: bytes) -> list[LineResult]:
        with _one_line():
            results = list(take_records(split_records(body), self.emitter, source="intake"))
        refused = [r for r in results if r.trace is None]
        if refused:
            first = refused[0]
            log.warning("intake: quarantined %d of %d records (first, line %s: %s)", len(refused), len(results),
                        first.line, (first.reason or "invalid")[:300])
        return results

    # -- queries --------------------------------------------------------------------------------
    async def trace(self, request: web.Request) -> web.Response:
        """``GET /v1/traces/{request_id}``: one trace; 404 ``trace_not_found`` when there is none."""
        request_id = request.match_info["request_id"]
        if len(request_id) > _MAX_ID:
            return error_response(400, f"request_id is longer than {_MAX_ID} characters", "invalid_request_id",
                                  "request_id")
        trace = await asyncio.to_thread(self._lookup, request_id)
        if trace is None:
            return error_response(404, f"no trace for request_id '{request_id}'", "trace_not_found")
        return web.Response(body=trace.model_dump_json(), content_type="application/json")

    async def policy(self, request: web.Request) -> web.Response:
        """``GET /v1/policies/{policy_hash}``: a stored policy; 404 ``policy_not_found`` when there is none."""
        policy_hash = request.match_info["policy_hash"]
        if len(policy_hash) > _MAX_ID:
            return error_response(400, f"policy_hash is longer than {_MAX_ID} characters", "invalid_policy_hash",
                                  "policy_hash")
        found = await asyncio.to_thread(self.store.policy, policy_hash)
        if found is None:
            return error_response(404, f"no policy stored under '{policy_hash}'", "policy_not_found")
        return web.Response(body=found.model_dump_json(), content_type="application/json")

    def _lookup(self, request_id: str) -> DecisionTrace | None:
        """Read your writes: a trace emitted or relayed a moment ago is found before the store wrote it.

        Traces emitted here wait as pending traces. Those relayed from a gateway wait in the spool
        as its bytes: when the store has not got the id, what waits is written first (at once, not
        at the end of the flush interval) and the store asked again. Asked again even when nothing
        waits any more: the write that held the trace may have ended between the two looks.
        """
        found = self.emitter.pending(request_id) or self.store.get(request_id)
        if found is None and (not self.emitter.backlog_size() or self.emitter.flush(_LOOKUP_FLUSH_S)):
            found = self.store.get(request_id)
        return found

    async def search(self, request: web.Request) -> web.Response:
        """``GET /v1/traces``: one page of summaries, newest first."""
        q = query_of(SearchQuery, request)
        return _json(await asyncio.to_thread(self.store.search, _trace_filter(q), q.limit, q.cursor))

    async def buckets(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/buckets``: aggregates per time bucket."""
        q = query_of(BucketsQuery, request)
        for bound in ("start", "end"):
            if getattr(q, bound) is None:
                raise BadParam(bound, f"{bound} is required: aggregates are over a window")
        try:
            query = AggregateQuery.model_validate({"filter": _trace_filter(q), "bucket": q.bucket})
        except ValidationError as exc:
            raise BadParam("bucket", describe_validation_error(exc)) from exc
        return _json(BucketsAnswer(buckets=await asyncio.to_thread(self.store.aggregate, query)))

    async def traffic(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/traffic``: rule -> model -> instance counts."""
        return _json(TrafficAnswer(edges=await asyncio.to_thread(self.store.traffic, _filter(request))))

    async def constraints(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/constraints``: how often each constraint removed each instance."""
        return _json(ConstraintsAnswer(
            constraints=await asyncio.to_thread(self.store.constraint_stats, _filter(request))))

    async def misroutes(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/misroutes``: feedback with ``correct=false``, newest first (``limit``)."""
        q = query_of(MisroutesQuery, request)
        found = await asyncio.to_thread(self.store.misroutes, _trace_filter(q), q.limit)
        return _json(MisroutesAnswer(misroutes=found))

    async def feedback(self, request: web.Request) -> web.Response:
        """``GET /v1/feedback?request_id=``: every verdict on one request, oldest first (read-your-writes)."""
        q = query_of(FeedbackQuery, request)
        return _json(FeedbackAnswer(feedback=await asyncio.to_thread(self._feedback_of, q.request_id)))

    def _feedback_of(self, request_id: str) -> list[Feedback]:
        """A verdict posted a moment ago is found: with none stored, what waits to be written is written first."""
        found = self.store.feedback(request_id)
        if not found and self.emitter.backlog_size() and self.emitter.flush(_LOOKUP_FLUSH_S):
            found = self.store.feedback(request_id)
        return found

    async def compare(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/compare``: ``a`` against ``b`` metric by metric, with intervals and the SRM check.

        The split is checked against ``shares`` (the designed fractions of A and B). The store does
        not know the arms' shares (they are the gateway's configuration): without ``shares`` the
        report assumes 50/50 and says so in its verdict, and flags no mismatch.
        """
        raw: dict[str, Any] = {k: v for k, v in request.query.items() if k in _COMPARE}
        raw.update(start=_time(request, "start").isoformat(), end=_time(request, "end").isoformat())
        if "shares" in request.query:
            raw["shares"] = request.query["shares"].split(",")
        try:
            query = CompareQuery.model_validate(raw)
        except ValidationError as exc:
            loc = exc.errors()[0]["loc"]
            raise BadParam(str(loc[0]) if loc else "query", describe_validation_error(exc)) from exc
        report = await asyncio.to_thread(self.store.compare, query)
        return _json(report if "shares" in request.query else assumed_even_split(report))

    async def groups(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/groups``: requests per arm, router version or policy hash (``by``) in a window."""
        q = query_of(GroupsQuery, request)
        groups = await asyncio.to_thread(self.store.experiment_groups, q.by, q.start, q.end)
        return _json(GroupsAnswer(by=q.by, groups=groups))

    async def latches(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/latches``: latch out-intervals; 404 ``not_supported`` from a store without them."""
        q = query_of(LatchesQuery, request)
        method = getattr(self.store, "latch_intervals", None)  # DuckDB computes them; Elasticsearch does not yet
        if method is None:
            return error_response(404, "this store does not compute latch intervals: read /v1/snapshots",
                                  "not_supported")
        return _json(await asyncio.to_thread(method, q.start, q.end, q.instance, q.limit))

    async def probes(self, request: web.Request) -> web.Response:
        """``GET /v1/probes``: the probe timeline (``instance`` and ``kind`` narrow it)."""
        q = query_of(ProbesQuery, request)
        kind = None if q.kind is None else q.kind.value
        args = (q.start, q.end, q.instance, q.limit, kind)
        return _json(ProbesAnswer(results=await asyncio.to_thread(self.store.probe_timeline, *args)))

    async def events(self, request: web.Request) -> web.Response:
        """``GET /v1/events``: router events."""
        q = query_of(EventsQuery, request)
        return _json(EventsAnswer(events=await asyncio.to_thread(self.store.events, q.start, q.end, q.kind, q.limit)))

    async def snapshots(self, request: web.Request) -> web.Response:
        """``GET /v1/snapshots``: instance snapshots."""
        q = query_of(SnapshotsQuery, request)
        snaps = await asyncio.to_thread(self.store.snapshots, q.start, q.end, q.instance, q.limit)
        return _json(SnapshotsAnswer(snapshots=snaps))

    async def quarantined(self, request: web.Request) -> web.Response:
        """``GET /v1/quarantine``: quarantined records."""
        q = query_of(QuarantineQuery, request)
        return _json(QuarantineAnswer(records=await asyncio.to_thread(self.store.quarantined, q.start, q.end, q.limit)))
