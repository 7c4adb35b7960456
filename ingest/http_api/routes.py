"""The store's whole HTTP API, mounted on the server's aiohttp application.

===========================  ===============================================================
``POST /v1/traces``          intake: NDJSON or a JSON array of traces; per-line verdicts
``GET /v1/traces``           search (filters as query parameters; ``limit``, ``cursor``)
``GET /v1/traces/{id}``      one trace, emitted ones not yet stored included (read-your-writes)
``GET /v1/policies/{hash}``  the policy stored under a trace's ``policy_hash``
``GET /v1/analytics/buckets`` per time bucket: requests, latency quantiles, fallback, cost, misroutes
``GET /v1/analytics/window`` the whole window (``start``, ``end`` required) as one bucket: its own quantiles
``GET /v1/analytics/traffic`` requests along rule -> model -> instance
``GET /v1/analytics/constraints`` per (constraint, instance, model): removals, decisive, soft
``GET /v1/analytics/misroutes`` feedback saying the routing was wrong, with its trace (``limit``)
``GET /v1/feedback``         every verdict on one request (``request_id``), correct or not
``GET /v1/analytics/compare`` two arms, versions or policies (``a``, ``b``, ``by``, ``start``, ``end``, ``shares``)
``GET /v1/analytics/groups`` requests per arm, version or policy in a window (``by``, ``start``, ``end``)
``GET /v1/analytics/experiment-series`` each side per time bucket, forced requests left out (``a``, ``b``, ``by``,
                             ``bucket``, filters; ``start`` and ``end`` required)
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

from aiohttp import web

from ingest.http_api.answers import error_response, json_response
from ingest.http_api.experiment_routes import ExperimentRoutes
from ingest.http_api.openapi import (
    BucketsAnswer,
    ConstraintsAnswer,
    EventsAnswer,
    FeedbackAnswer,
    MisroutesAnswer,
    ProbesAnswer,
    QuarantineAnswer,
    SnapshotsAnswer,
    TrafficAnswer,
    WindowAnswer,
)
from ingest.http_api.params import (
    BadParam,
    BucketsQuery,
    EventsQuery,
    FeedbackQuery,
    LatchesQuery,
    MisroutesQuery,
    ProbesQuery,
    QuarantineQuery,
    SearchQuery,
    SnapshotsQuery,
    aggregate_query_of,
    filter_of,
    query_of,
    trace_filter_of,
)
from ingest.intake.lines import LineResult, split_records, take_records
from ingest.pipeline.emitter import TraceEmitter
from ingest.trace_store import BadCursor, TraceStore
from schemas.feedback import Feedback
from schemas.trace import DecisionTrace

__all__ = ["FEEDBACK_PATH", "INTAKE_PATH", "READ_ROUTES", "IngestApi"]


INTAKE_PATH = "/v1/traces"  # POST: traces from other routers or other gateways
FEEDBACK_PATH = "/v1/feedback"  # GET: a request's verdicts (POST is the gateway's own route)
# GET path -> the IngestApi method answering it: every read route, here once (the gateway's proxy forwards these)
READ_ROUTES = (
    ("/v1/traces", "search"), ("/v1/traces/{request_id}", "trace"),
    ("/v1/analytics/buckets", "buckets"), ("/v1/analytics/window", "window"), ("/v1/analytics/traffic", "traffic"),
    ("/v1/analytics/constraints", "constraints"), ("/v1/analytics/misroutes", "misroutes"),
    (FEEDBACK_PATH, "feedback"),
    ("/v1/analytics/compare", "compare"), ("/v1/analytics/groups", "groups"),
    ("/v1/analytics/experiment-series", "experiment_series"),
    ("/v1/analytics/latches", "latches"),
    ("/v1/probes", "probes"), ("/v1/events", "events"), ("/v1/snapshots", "snapshots"),
    ("/v1/quarantine", "quarantined"), ("/v1/policies/{policy_hash}", "policy"),
)
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


class IngestApi(ExperimentRoutes):
    """The intake and the query API (the experiment reads: :class:`ExperimentRoutes`).

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
                return error_response(401, "a valid intake token is required: send 'Authorization: Bearer <token>'",
                                      "invalid_api_key")
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
        return json_response({"accepted": len(accepted), "rejected": len(rejected),
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
        return json_response(await asyncio.to_thread(self.store.search, trace_filter_of(q), q.limit, q.cursor))

    async def buckets(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/buckets``: aggregates per time bucket."""
        query = aggregate_query_of(query_of(BucketsQuery, request))
        return json_response(BucketsAnswer(buckets=await asyncio.to_thread(self.store.aggregate, query)))

    async def window(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/window``: the window (``start`` and ``end`` required) as one bucket."""
        flt = filter_of(request)
        if flt.start is None or flt.end is None or flt.end <= flt.start:
            bound = "start" if flt.start is None else "end"
            raise BadParam(bound, f"{bound} is required and end must be after start: the figures are over a window")
        stats = getattr(self.store, "window_stats", None)
        if stats is None:
            return error_response(404, "this store does not compute window figures: read /v1/analytics/buckets",
                                  "not_supported")
        return json_response(WindowAnswer(window=await asyncio.to_thread(stats, flt)))

    async def traffic(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/traffic``: rule -> model -> instance counts."""
        return json_response(TrafficAnswer(edges=await asyncio.to_thread(self.store.traffic, filter_of(request))))

    async def constraints(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/constraints``: how often each constraint removed each instance."""
        return json_response(ConstraintsAnswer(
            constraints=await asyncio.to_thread(self.store.constraint_stats, filter_of(request))))

    async def misroutes(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/misroutes``: feedback with ``correct=false``, newest first (``limit``)."""
        q = query_of(MisroutesQuery, request)
        found = await asyncio.to_thread(self.store.misroutes, trace_filter_of(q), q.limit)
        return json_response(MisroutesAnswer(misroutes=found))

    async def feedback(self, request: web.Request) -> web.Response:
        """``GET /v1/feedback?request_id=``: every verdict on one request, oldest first (read-your-writes)."""
        q = query_of(FeedbackQuery, request)
        return json_response(FeedbackAnswer(feedback=await asyncio.to_thread(self._feedback_of, q.request_id,
                                                                             q.settle)))

    def _feedback_of(self, request_id: str, settle: bool) -> list[Feedback]:
        """A verdict posted a moment ago is found: with none stored, what waits to be written is written first.

        Not with ``settle`` False: the gateway asks about every verdict it takes (``has_stored_verdict``),
        and a write forced each time would turn the store's 2 s writes into one a verdict. The verdicts
        this store has received and not written yet answer instead (``TraceEmitter.pending_verdicts``,
        from memory; those its spool held at its start included), so one on its way counts as given.
        They are looked at before the store: a verdict leaves them only once it is written. Only when
        they cannot tell (more than ``PENDING_VERDICTS`` wait) is what waits written first, as settled.
        """
        waiting = None if settle else self.emitter.pending_verdicts(request_id)
        found = self.store.feedback(request_id)
        if not found and waiting:
            return waiting
        if not found and (settle or waiting is None) and self.emitter.backlog_size() \
                and self.emitter.flush(_LOOKUP_FLUSH_S):
            found = self.store.feedback(request_id)
        return found

    async def latches(self, request: web.Request) -> web.Response:
        """``GET /v1/analytics/latches``: latch out-intervals; 404 ``not_supported`` from a store without them."""
        q = query_of(LatchesQuery, request)
        method = getattr(self.store, "latch_intervals", None)  # DuckDB computes them; Elasticsearch does not yet
        if method is None:
            return error_response(404, "this store does not compute latch intervals: read /v1/snapshots",
                                  "not_supported")
        return json_response(await asyncio.to_thread(method, q.start, q.end, q.instance, q.limit))

    async def probes(self, request: web.Request) -> web.Response:
        """``GET /v1/probes``: the probe timeline (``instance`` and ``kind`` narrow it)."""
        q = query_of(ProbesQuery, request)
        kind = None if q.kind is None else q.kind.value
        args = (q.start, q.end, q.instance, q.limit, kind)
        return json_response(ProbesAnswer(results=await asyncio.to_thread(self.store.probe_timeline, *args)))

    async def events(self, request: web.Request) -> web.Response:
        """``GET /v1/events``: router events."""
        q = query_of(EventsQuery, request)
        events = await asyncio.to_thread(self.store.events, q.start, q.end, q.kind, q.limit)
        return json_response(EventsAnswer(events=events))

    async def snapshots(self, request: web.Request) -> web.Response:
        """``GET /v1/snapshots``: instance snapshots."""
        q = query_of(SnapshotsQuery, request)
        snaps = await asyncio.to_thread(self.store.snapshots, q.start, q.end, q.instance, q.limit)
        return json_response(SnapshotsAnswer(snapshots=snaps))

    async def quarantined(self, request: web.Request) -> web.Response:
        """``GET /v1/quarantine``: quarantined records."""
        q = query_of(QuarantineQuery, request)
        records = await asyncio.to_thread(self.store.quarantined, q.start, q.end, q.limit)
        return json_response(QuarantineAnswer(records=records))
