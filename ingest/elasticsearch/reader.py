"""The query API (:class:`ingest.trace_store.TraceStore`) over Elasticsearch data streams.

Filters become ``bool.filter`` clauses (``term``, ``range``: values are never spliced into query
strings: :mod:`ingest.elasticsearch.filters`), pages use ``search_after`` on ``(ts, request_id)``,
aggregates ``date_histogram`` with ``min_doc_count: 1`` (the same buckets DuckDB returns) and
``percentiles`` (t-digest: close to, not exactly, DuckDB's interpolated quantiles on large sets).
Feedback figures come from the feedback stream, whose documents carry the context of their trace
(``trace.*``), and from the verdicts stored before their trace, which carry none (added apart); a
filter on what the context does not hold (``violation``, ``otel_trace_id``) has the feedback joined
to its traces instead (:mod:`ingest.elasticsearch.analytics`).
The latency range is the gateway's total time (``outcome.total_ms``; ``trace.total_ms`` on feedback).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any

from elasticsearch import Elasticsearch

from ingest.codec.stored_rows import assemble_trace, clean, state_ids, summary_of
from ingest.elasticsearch.analytics import ElasticsearchAnalytics, VerdictTally, epoch_ms
from ingest.elasticsearch.experiments import ElasticsearchExperiments
from ingest.elasticsearch.filters import carried, filter_query, term
from ingest.elasticsearch.index_templates import TIMESTAMP_FIELD, data_stream
from ingest.kinds import KINDS, Kind
from ingest.trace_store import (
    MAX_LIMIT,
    BadCursor,
    WindowReader,
    clamp_limit,
    decode_cursor,
    encode_cursor,
    sort_traffic,
)
from schemas.queries import BUCKETS, AggregateQuery, BucketStats, TraceFilter, TracePage, TrafficEdge
from schemas.trace import DecisionTrace

__all__ = ["ElasticsearchReader", "filter_query", "term"]

_SUMMARY = ["request_id", "ts", "router_version", "experiment_arm", "rule", "query_hash", "selected_model",
            "selected_instance", "fallback_triggered", "mode", "outcome", "latency_ms", "detail", "shadow",
            "otel_trace_id"]
_NONE = "\u0000none"


class ElasticsearchReader(ElasticsearchAnalytics, ElasticsearchExperiments, WindowReader):
    """Answers the query API from the data streams ``<prefix>-<table>``."""

    def __init__(self, client: Elasticsearch, prefix: str = "routelens") -> None:
        self.client = client
        self.prefix = prefix

    @staticmethod
    def _query(flt: TraceFilter, prefix: str = "") -> dict[str, Any]:
        """Return the ``bool`` query of ``flt`` (see :func:`filter_query`)."""
        return filter_query(flt, prefix)

    def _search(self, kind: Kind, **body: Any) -> dict[str, Any]:
        """Search the data stream of ``kind`` and return the response body."""
        resp = self.client.search(index=data_stream(self.prefix, kind), ignore_unavailable=True, **body)
        return dict(resp.body)

    def get(self, request_id: str) -> DecisionTrace | None:
        """Return the trace of ``request_id`` with its candidate states, or None."""
        hits = self._search(Kind.TRACE, query=term("request_id", request_id), size=1,
                            sort=[{"ts": {"order": "desc"}}])["hits"]["hits"]
        if not hits:
            return None
        row = hits[0]["_source"]
        ids = sorted(set(state_ids(row)))
        states = {}
        if ids:
            found = self._search(Kind.SNAPSHOT, query={"terms": {"snapshot_id": ids}}, size=len(ids))
            states = {h["_source"]["snapshot_id"]: h["_source"] for h in found["hits"]["hits"]}
        return assemble_trace(row, states)

    def search(self, flt: TraceFilter, limit: int = 50, cursor: str | None = None) -> TracePage:
        """Return one page of summaries, newest first."""
        limit = clamp_limit(limit)
        body: dict[str, Any] = {"query": filter_query(flt), "size": limit + 1, "source_includes": _SUMMARY,
                                "sort": [{"ts": {"order": "desc"}}, {"request_id": {"order": "desc"}}]}
        if cursor is not None:
            values = decode_cursor(cursor)
            if not isinstance(values[0], int):
                raise BadCursor("invalid cursor")
            body["search_after"] = values
        hits = self._search(Kind.TRACE, **body)["hits"]["hits"]
        items = []
        for hit in hits[:limit]:
            src = hit["_source"]
            out = src.get("outcome") or {}
            items.append(summary_of({**src, "outcome_status": out.get("status"), "http_status": out.get("http_status"),
                                     "total_ms": out.get("total_ms"), "cost": out.get("cost")}))
        nxt = encode_cursor(list(hits[limit - 1]["sort"])) if len(hits) > limit else None
        return TracePage(items=items, next_cursor=nxt)

    def aggregate(self, query: AggregateQuery) -> list[BucketStats]:
        """Return the time buckets of ``query`` that hold at least one request."""
        hist = {"fixed_interval": f"{BUCKETS[query.bucket]}s", "min_doc_count": 1}
        aggs = {"b": {"date_histogram": {"field": "ts", **hist}, "aggs": _BUCKET_AGGS}}
        traces = self._search(Kind.TRACE, query=filter_query(query.filter), size=0, aggs=aggs)
        step = BUCKETS[query.bucket] * 1000  # the histogram's keys: epoch milliseconds, floored to the interval
        feedback = self._feedback(query.filter, lambda ctx: epoch_ms(ctx["ts"]) // step * step, hist)
        return [_bucket(datetime.fromtimestamp(b["key"] / 1000, UTC), b["doc_count"], b, feedback.get(b["key"]))
                for b in (traces.get("aggregations") or {}).get("b", {}).get("buckets", [])]

    def window_stats(self, flt: TraceFilter) -> BucketStats | None:
        """Return the window ``[flt.start, flt.end)`` as one bucket (its own percentiles); None without a request."""
        if flt.start is None or flt.end is None:
            raise ValueError("window_stats needs filter.start and filter.end")
        traces = self._search(Kind.TRACE, query=filter_query(flt), size=0, aggs=_BUCKET_AGGS, track_total_hits=True)
        n = traces["hits"]["total"]["value"]
        if not n:
            return None
        return _bucket(flt.start, n, traces.get("aggregations") or {}, self._feedback(flt, lambda ctx: None).get(None))

    def _feedback(self, flt: TraceFilter, key: Callable[[dict[str, Any]], Hashable],
                  hist: dict[str, Any] | None = None) -> dict[Hashable, VerdictTally]:
        """The feedback on the traces ``flt`` selects, counted by ``key(trace context)``.

        ``hist``: the ``date_histogram`` whose buckets ``key`` names (None: one group). A filter the
        context carries is one aggregation and the verdicts stored before their trace; another one
        is joined (:meth:`_tally_joined`).
        """
        if not carried(flt):
            return self._tally_joined(filter_query(flt), filter_query(flt, "trace."), key)
        feedback = self._tally_before_trace(filter_query(flt), key)
        query = filter_query(flt, "trace.")
        if hist is None:
            fb = self._search(Kind.FEEDBACK, query=query, size=0, aggs=_FEEDBACK_AGGS, track_total_hits=True)
            _add(feedback.setdefault(None, VerdictTally()),
                 {"doc_count": fb["hits"]["total"]["value"], **(fb.get("aggregations") or {})})
            return feedback
        fb_aggs = {"b": {"date_histogram": {"field": "trace.ts", **hist}, "aggs": _FEEDBACK_AGGS}}
        fb = self._search(Kind.FEEDBACK, query=query, size=0, aggs=fb_aggs)
        for b in (fb.get("aggregations") or {}).get("b", {}).get("buckets", []):
            _add(feedback.setdefault(b["key"], VerdictTally()), b)
        return feedback

    def traffic(self, flt: TraceFilter) -> list[TrafficEdge]:
        """Return request counts per (rule, model, instance)."""
        def terms(field: str, sub: dict[str, Any] | None = None) -> dict[str, Any]:
            agg: dict[str, Any] = {"terms": {"field": field, "size": MAX_LIMIT, "missing": _NONE}}
            if sub:
                agg["aggs"] = sub
            return agg

        aggs = {"rule": terms("rule", {"model": terms("selected_model", {"instance": terms("selected_instance")})})}
        resp = self._search(Kind.TRACE, query=filter_query(flt), size=0, aggs=aggs)
        edges = []
        for r in (resp.get("aggregations") or {}).get("rule", {}).get("buckets", []):
            for m in r["model"]["buckets"]:
                for i in m["instance"]["buckets"]:
                    edges.append(TrafficEdge(rule=_none(r["key"]), model=_none(m["key"]), instance=_none(i["key"]),
                                             requests=i["doc_count"]))
        return sort_traffic(edges)

    def _window(self, kind: Kind, start: datetime, end: datetime, eq: dict[str, str | None], limit: int) -> list[Any]:
        """Return records of ``kind`` in ``[start, end)`` matching ``eq``, oldest first (see :class:`WindowReader`)."""
        info = KINDS[kind]
        span = {"gte": start.isoformat(), "lt": end.isoformat()}
        clauses: list[dict[str, Any]] = [{"range": {info.time_field: span}}]
        clauses += [term(k, v) for k, v in eq.items() if v is not None]
        resp = self._search(kind, query={"bool": {"filter": clauses}}, size=limit,
                            sort=[{info.time_field: {"order": "asc"}}, {info.id_field: {"order": "asc"}}])
        model = info.model
        return [model.model_validate(clean({k: v for k, v in h["_source"].items() if k != TIMESTAMP_FIELD}, model))
                for h in resp["hits"]["hits"]]


def _none(key: Any) -> str | None:
    return None if key == _NONE else str(key)


_BUCKET_AGGS = {
    "errors": {"filter": term("outcome.status", "error")},
    "fallbacks": {"filter": term("fallback_triggered", True)},
    "latency": {"percentiles": {"field": "outcome.total_ms", "percents": [50, 95, 99]}},
    "cost": {"sum": {"field": "outcome.cost"}},
}
_FEEDBACK_AGGS = {"misroutes": {"filter": term("correct", False)}}


def _add(tally: VerdictTally, b: dict[str, Any]) -> None:
    """Add a feedback bucket's counts (``doc_count``, ``misroutes``) to ``tally``."""
    tally.feedback += int(b["doc_count"])
    tally.misroutes += int(b["misroutes"]["doc_count"]) if b["doc_count"] else 0


def _bucket(start: datetime, n: int, b: dict[str, Any], f: VerdictTally | None) -> BucketStats:
    """One bucket's stats from its trace aggregations ``b`` and its feedback's ``f`` (None: no feedback)."""
    q = b["latency"].get("values") or {}
    n_fb, n_mis = (f.feedback, f.misroutes) if f else (0, 0)
    return BucketStats(
        start=start, requests=n, errors=b["errors"]["doc_count"], fallbacks=b["fallbacks"]["doc_count"],
        fallback_rate=b["fallbacks"]["doc_count"] / n, latency_p50_ms=q.get("50.0"), latency_p95_ms=q.get("95.0"),
        latency_p99_ms=q.get("99.0"), cost=float(b["cost"]["value"] or 0.0), feedback=n_fb, misroutes=n_mis,
        misroute_rate=n_mis / n_fb if n_fb else None,
    )
