"""The query API over HTTP, for processes that cannot open the store themselves.

:class:`HttpTraceStore` is a :class:`ingest.trace_store.TraceStore` that asks a running RouteLens server
(``ingest.http_api.routes``): DuckDB admits one writing process per file, so the app reads through it.
It is the one client of a server's read API: :meth:`HttpTraceStore.get_json` reads the server's
other JSON routes (``/v1/alerts``, ``/v1/router/state``, ``/v1/probes/verdicts``) the same way
(loopback without a proxy, the read token as a bearer, one error tree).
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from ingest.duckdb.latches import INTERVAL_LIMIT, LatchIntervals
from ingest.errors import SinkError, SinkUnavailable
from ingest.trace_store import MAX_LIMIT, BadCursor, clamp_limit
from schemas.experiments import CompareBy, CompareQuery, CompareReport
from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.policy_record import PolicyRecord
from schemas.probe import ProbeResult
from schemas.queries import (
    AggregateQuery,
    BucketStats,
    ConstraintStat,
    Misroute,
    TraceFilter,
    TracePage,
    TrafficEdge,
)
from schemas.records import QuarantinedRecord, RouterEvent
from schemas.trace import DecisionTrace

__all__ = ["HttpTraceStore", "Unauthorized"]

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class Unauthorized(SinkError):
    """The server answered 401: no read token was sent, or not one it takes (a caller says where the token is set)."""


def _http_error(message: str, code: int) -> SinkError:
    return Unauthorized(message) if code == 401 else SinkError(message)


class HttpTraceStore:
    """Reads through a server's query API.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8080``.
        timeout_s: Connect and read timeout of one request.
        token: The server's read token (``storage.read_token_env``), sent as ``Authorization: Bearer``.
    """

    def __init__(self, base_url: str, timeout_s: float = 10.0, *, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        local = urllib.parse.urlsplit(self.base_url).hostname in _LOOPBACK
        self._opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if local else []))

    def _read(self, path: str) -> bytes:
        """``GET`` ``path`` (with its query string) and return the body.

        Raises:
            urllib.error.HTTPError: The server answered an error status (each caller maps it).
            SinkUnavailable: The server does not answer.
        """
        url = self.base_url + path
        try:
            with self._opener.open(urllib.request.Request(url, headers=self._headers), timeout=self.timeout_s) as resp:
                body: bytes = resp.read()
                return body
        except urllib.error.HTTPError:
            raise
        except ValueError as exc:  # urllib's "unknown url type": not a server's fault
            raise SinkError(f"{self.base_url} is not an http:// or https:// URL: {exc}") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise SinkUnavailable(f"the RouteLens server at {self.base_url} is unreachable: {exc}") from exc

    def get_json(self, path: str) -> Any:
        """``GET`` one JSON document from the server, e.g. ``/v1/alerts`` or ``/v1/probes/stats?instance=a``.

        Args:
            path: The path, with its query string if any.

        Raises:
            SinkUnavailable: The server does not answer.
            SinkError: It answered an HTTP error or a body that is not JSON.
        """
        try:
            body = self._read(path)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise _http_error(f"GET {path}: HTTP {exc.code} from the server at {self.base_url}", exc.code) from exc
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise SinkError(f"GET {path}: the server at {self.base_url} answered a body that is not JSON") from exc

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v is not None})
        try:
            return orjson.loads(self._read(path + (f"?{query}" if query else "")))
        except urllib.error.HTTPError as exc:
            body = exc.read()
            exc.close()
            try:
                err = orjson.loads(body).get("error", {})
            except (orjson.JSONDecodeError, AttributeError):
                err = {}
            if exc.code == 404 and err.get("code") in ("trace_not_found", "policy_not_found"):
                return None
            if err.get("code") == "invalid_cursor":
                raise BadCursor(err.get("message", "invalid cursor")) from exc
            raise _http_error(f"GET {path}: HTTP {exc.code}: {err.get('message', exc.reason)}", exc.code) from exc

    @staticmethod
    def _filter(flt: TraceFilter) -> dict[str, Any]:
        out: dict[str, Any] = flt.model_dump(mode="json", exclude_none=True)
        if "fallback" in out:
            out["fallback"] = "true" if out["fallback"] else "false"
        if "unset" in out:
            out["unset"] = ",".join(out["unset"])
        return out

    @staticmethod
    def _models(model: type[BaseModel], items: list[Any]) -> list[Any]:
        try:
            return [model.model_validate(i) for i in items]
        except ValidationError as exc:
            raise SinkError(f"the server answered an invalid {model.__name__}: {exc}") from exc

    def get(self, request_id: str) -> DecisionTrace | None:
        """Return the trace of ``request_id``, or None."""
        data = self._get(f"/v1/traces/{urllib.parse.quote(request_id, safe='')}")
        return None if data is None else DecisionTrace.model_validate(data)

    def search(self, flt: TraceFilter, limit: int = 50, cursor: str | None = None) -> TracePage:
        """Return one page of summaries, newest first."""
        page = self._get("/v1/traces", {**self._filter(flt), "limit": clamp_limit(limit), "cursor": cursor})
        return TracePage.model_validate(page)

    def aggregate(self, query: AggregateQuery) -> list[BucketStats]:
        """Return per-bucket statistics."""
        data = self._get("/v1/analytics/buckets", {**self._filter(query.filter), "bucket": query.bucket})
        return self._models(BucketStats, data["buckets"])

    def window_stats(self, flt: TraceFilter) -> BucketStats | None:
        """Return the window ``[flt.start, flt.end)`` as one bucket, with its own latency quantiles (None: empty)."""
        data = self._get("/v1/analytics/window", self._filter(flt))
        if not isinstance(data, dict) or "window" not in data:  # a server from before the route
            raise SinkError(f"the server at {self.base_url} answers no window figures")
        return None if data["window"] is None else BucketStats.model_validate(data["window"])

    def traffic(self, flt: TraceFilter) -> list[TrafficEdge]:
        """Return request counts per (rule, model, instance)."""
        return self._models(TrafficEdge, self._get("/v1/analytics/traffic", self._filter(flt))["edges"])

    def constraint_stats(self, flt: TraceFilter) -> list[ConstraintStat]:
        """Return per (constraint, instance, model) removals, decisive ones and soft violations."""
        return self._models(ConstraintStat, self._get("/v1/analytics/constraints", self._filter(flt))["constraints"])

    def misroutes(self, flt: TraceFilter, limit: int = 100) -> list[Misroute]:
        """Return feedback with ``correct=false`` on traces matching ``flt``, newest feedback first."""
        data = self._get("/v1/analytics/misroutes", {**self._filter(flt), "limit": clamp_limit(limit)})
        return self._models(Misroute, data["misroutes"])

    def feedback(self, request_id: str, *, settle: bool = True) -> list[Feedback]:
        """Return every verdict recorded on ``request_id``, oldest first (``settle``: see ``TraceStore.feedback``).

        Raises:
            SinkError: The server is unreachable, has no such read (an older one: 404 or 405), or
                answered an invalid body.
        """
        data = self._get("/v1/feedback", {"request_id": request_id, **({} if settle else {"settle": "false"})})
        if data is None:  # a 404 whose code reads as "no trace": a server that does not know the route
            raise SinkError(f"the server at {self.base_url} does not serve GET /v1/feedback")
        return self._models(Feedback, data["feedback"])

    def experiment_groups(self, by: CompareBy, start: datetime, end: datetime) -> dict[str, int]:
        """Return the requests per arm, router version or policy hash in ``[start, end)``, busiest first."""
        data = self._get("/v1/analytics/groups", {"by": by, "start": start.isoformat(), "end": end.isoformat()})
        return {str(k): int(v) for k, v in data["groups"].items()}

    def experiment_series(self, by: CompareBy, a: str, b: str, query: AggregateQuery) -> dict[str, list[BucketStats]]:
        """Return each side's buckets of ``query``, requests forced onto an arm by header left out.

        Raises:
            SinkError: The server is unreachable, answered an error (an older one, without the route:
                says so), or an invalid body.
        """
        params = {**self._filter(query.filter), "by": by, "a": a, "b": b, "bucket": query.bucket}
        try:
            data = self._get("/v1/analytics/experiment-series", params)
        except SinkError as exc:
            cause = exc.__cause__
            if isinstance(cause, urllib.error.HTTPError) and cause.code == 404:
                raise SinkError(f"the server at {self.base_url} does not serve GET /v1/analytics/experiment-series "
                                "(an older RouteLens)") from exc
            raise
        return {a: self._models(BucketStats, data["buckets_a"]), b: self._models(BucketStats, data["buckets_b"])}

    def compare(self, query: CompareQuery) -> CompareReport:
        """Compare two arms, router versions or policy hashes metric by metric."""
        params = query.model_dump(mode="json")
        params["shares"] = ",".join(str(s) for s in query.shares)
        try:
            return CompareReport.model_validate(self._get("/v1/analytics/compare", params))
        except ValidationError as exc:
            raise SinkError(f"the server answered an invalid CompareReport: {exc}") from exc

    @staticmethod
    def _span(start: datetime, end: datetime, limit: int, **eq: str | None) -> dict[str, Any]:
        return {"start": start.isoformat(), "end": end.isoformat(), "limit": clamp_limit(limit), **eq}

    def probe_timeline(self, start: datetime, end: datetime, instance: str | None = None,
                       limit: int = MAX_LIMIT, kind: str | None = None) -> list[ProbeResult]:
        """Return probe results in ``[start, end)``, oldest first (of one instance and kind when given)."""
        data = self._get("/v1/probes", self._span(start, end, limit, instance=instance, kind=kind))
        return self._models(ProbeResult, data["results"])

    def events(self, start: datetime, end: datetime, kind: str | None = None,
               limit: int = MAX_LIMIT) -> list[RouterEvent]:
        """Return router events in ``[start, end)``, oldest first."""
        return self._models(RouterEvent, self._get("/v1/events", self._span(start, end, limit, kind=kind))["events"])

    def snapshots(self, start: datetime, end: datetime, instance: str | None = None,
                  limit: int = MAX_LIMIT) -> list[InstanceSnapshot]:
        """Return instance snapshots first seen in ``[start, end)``, oldest first."""
        data = self._get("/v1/snapshots", self._span(start, end, limit, instance=instance))
        return self._models(InstanceSnapshot, data["snapshots"])

    def latch_intervals(self, start: datetime, end: datetime, instance: str | None = None,
                        limit: int = INTERVAL_LIMIT) -> LatchIntervals | None:
        """Return latch out-intervals of the snapshots in ``[start, end)``; None from a server without the route.

        Raises:
            SinkError: The server is unreachable or answered another error, or an invalid body.
        """
        params = {"start": start.isoformat(), "end": end.isoformat(), "instance": instance,
                  "limit": max(1, min(limit, INTERVAL_LIMIT))}
        try:
            data = self._get("/v1/analytics/latches", params)
        except SinkError as exc:
            cause = exc.__cause__
            if isinstance(cause, urllib.error.HTTPError) and cause.code == 404:
                return None  # an older server, or a store that does not compute them
            raise
        if data is None:  # a 404 that _get reads as "not found"
            return None
        try:
            return LatchIntervals.model_validate(data)
        except ValidationError as exc:
            raise SinkError(f"the server answered invalid LatchIntervals: {exc}") from exc

    def quarantined(self, start: datetime, end: datetime, limit: int = MAX_LIMIT) -> list[QuarantinedRecord]:
        """Return quarantined records in ``[start, end)``, oldest first."""
        return self._models(QuarantinedRecord, self._get("/v1/quarantine", self._span(start, end, limit))["records"])

    def policy(self, policy_hash: str) -> PolicyRecord | None:
        """Return the policy stored under ``policy_hash``, or None."""
        data = self._get(f"/v1/policies/{urllib.parse.quote(policy_hash, safe='')}")
        return None if data is None else PolicyRecord.model_validate(data)

    def close(self) -> None:
        """Nothing to release."""
