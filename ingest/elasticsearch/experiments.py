"""The experiment reads of the Elasticsearch store: each side of a comparison from aggregations.

Three searches, ``size: 0``: the traces of both sides (a ``terms`` bucket per side with filters for
errors and fallbacks, the cost sum and count, and percentile grids of latency and cost), and their
feedback (whose documents carry the trace's context, ``trace.*``), both without the requests forced
onto an arm by header; then those forced requests' count per side. No document reaches Python.
``experiment_series`` is each side per time bucket, without forced requests (two searches: traces, feedback;
a filter the feedback's context does not carry has its feedback joined to the traces instead:
:meth:`ingest.elasticsearch.analytics.ElasticsearchAnalytics._joined`).

What differs from DuckDB, and what it costs: Elasticsearch has no log-spaced histogram, so the
latency bins are rebuilt from a grid of :data:`GRID` percentiles (TDigest): each slice between two
neighbouring levels puts its share of the requests in the bin of its midpoint. p50 and p95 are
grid points: Elasticsearch's own values of them are the comparison's point values (as its Overview
shows them), and the bootstrap runs on the rebuilt bins as on DuckDB. Cost per request is the mean
over every request, one without a recorded cost counting 0 (sum / requests, exact); its variance
(an ``extended_stats`` aggregation is outside the contract this store is held to) takes the costed
requests' second moment from the square of the same linearly interpolated percentile function.
Feedback counts one verdict per request, as the sink stores them; the verdicts stored before their
trace, which carry no ``trace.*``, are counted apart on the sides their traces are on
(:meth:`ingest.elasticsearch.analytics.ElasticsearchAnalytics._verdicts_before_trace`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ingest.elasticsearch.analytics import VerdictTally, epoch_ms
from ingest.elasticsearch.filters import carried
from ingest.experiments.compare import BINS, QUANTILES, Exact, build_report, histogram_of
from ingest.kinds import Kind
from schemas.experiments import COMPARE_BY, ArmStats, CompareBy, CompareQuery, CompareReport
from schemas.queries import BUCKETS, AggregateQuery, BucketStats, TraceFilter

__all__ = ["GRID", "ElasticsearchExperiments"]

# 0, 0.1, ..., 100 (1,001 levels): 50 and 95 are on it.
GRID: list[float] = [round(i / 10, 1) for i in range(1001)]


def _term(field: str, value: Any) -> dict[str, Any]:
    return {"term": {field: {"value": value}}}


_FORCED = _term("arm_forced", True)
"""A trace forced onto its arm by header: left out of every figure, counted apart (``ArmStats.forced``)."""


def _span(start: datetime, end: datetime, prefix: str = "") -> dict[str, Any]:
    return {"range": {prefix + "ts": {"gte": start.isoformat(), "lt": end.isoformat()}}}


def _levels(values: dict[str, Any] | None) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Return the (level, value) pairs of a ``percentiles`` answer, sorted, without empty ones."""
    pairs = sorted((float(k), float(v)) for k, v in (values or {}).items() if v is not None)
    return np.array([p for p, _ in pairs]), np.array([v for _, v in pairs])


def _bins_from_grid(values: dict[str, Any] | None, n: int) -> dict[int, int]:
    """Spread ``n`` requests over the latency bins by the slices of a percentile grid."""
    levels, vals = _levels(values)
    if n == 0 or len(levels) < 2:
        return {int(BINS.index([vals[0]])[0]): n} if n and len(vals) else {}
    share = np.diff(levels) / (levels[-1] - levels[0])
    mids = (vals[:-1] + vals[1:]) / 2.0
    # Rounding the running total, not each slice, spreads n over the slices evenly and sums to n.
    edges = np.rint(np.concatenate(([0.0], np.cumsum(share))) * n).astype(np.int64)
    edges[-1] = n
    counts = np.diff(edges)
    out: dict[int, int] = {}
    for b, c in zip(BINS.index(mids).tolist(), counts.tolist(), strict=True):
        if c:
            out[b] = out.get(b, 0) + c
    return out


def _variance_from_grid(values: dict[str, Any] | None, mean: float, n: int, costed: int) -> float | None:
    """Sample variance over ``n`` requests, ``costed`` of which hold the value its percentile grid describes.

    The others count 0; the quantile function is linear between levels (its square integrated).
    """
    levels, vals = _levels(values)
    if n < 2 or len(levels) < 2:
        return None
    w = np.diff(levels) / (levels[-1] - levels[0])
    lo, hi = vals[:-1], vals[1:]
    second = float((w * (lo * lo + lo * hi + hi * hi) / 3.0).sum()) * costed / n
    return max(0.0, second - mean * mean) * n / (n - 1)


class ElasticsearchExperiments:
    """``experiment_groups``, ``compare`` and ``experiment_series`` over the reader's ``_search``."""

    @abstractmethod
    def _search(self, kind: Kind, **body: Any) -> dict[str, Any]:
        """Search the data stream of ``kind`` and return the response body."""

    @staticmethod
    @abstractmethod
    def _query(flt: TraceFilter, prefix: str = "") -> dict[str, Any]:
        """Return the ``bool`` query of ``flt`` (``prefix`` ``trace.`` for feedback documents)."""

    @abstractmethod
    def _tally_before_trace(self, traces: dict[str, Any],
                            key: Callable[[dict[str, Any]], Hashable]) -> dict[Hashable, VerdictTally]:
        """The verdicts stored before their trace, on traces ``traces`` selects, counted by ``key(context)``."""

    @abstractmethod
    def _tally_joined(self, traces: dict[str, Any], context: dict[str, Any],
                      key: Callable[[dict[str, Any]], Hashable]) -> dict[Hashable, VerdictTally]:
        """Every verdict on the traces ``traces`` selects, counted by ``key(context)``."""

    def experiment_groups(self, by: CompareBy, start: datetime, end: datetime) -> dict[str, int]:
        """Return the requests per arm, router version or policy hash in ``[start, end)``, busiest first."""
        aggs = {"g": {"terms": {"field": COMPARE_BY[by], "size": 1000}}}
        resp = self._search(Kind.TRACE, query={"bool": {"filter": [_span(start, end)]}}, size=0, aggs=aggs)
        return {str(b["key"]): int(b["doc_count"]) for b in (resp.get("aggregations") or {}).get("g", {}).get(
            "buckets", [])}

    def experiment_series(self, by: CompareBy, a: str, b: str, query: AggregateQuery) -> dict[str, list[BucketStats]]:
        """Return each side's buckets of ``query`` that hold a request, oldest first, as ``aggregate`` would.

        Requests forced onto an arm by header and their feedback are left out, as ``compare`` leaves
        them out. ``query.filter`` bounds the window and may narrow it further (model, instance, ...).
        """
        field, hist = COMPARE_BY[by], {"fixed_interval": f"{BUCKETS[query.bucket]}s", "min_doc_count": 1}
        aggs = {"g": {"terms": {"field": field, "size": 2}, "aggs": {"b": {
            "date_histogram": {"field": "ts", **hist}, "aggs": {
                "errors": {"filter": _term("outcome.status", "error")},
                "fallbacks": {"filter": _term("fallback_triggered", True)},
                "latency": {"percentiles": {"field": "outcome.total_ms", "percents": [50, 95, 99]}},
                "cost": {"sum": {"field": "outcome.cost"}},
            }}}}}
        sides = self._sides(query.filter, field, [a, b])
        traces = self._search(Kind.TRACE, size=0, aggs=aggs, query=sides)
        step = BUCKETS[query.bucket] * 1000  # the histogram's keys: epoch milliseconds, floored to the interval

        def key(ctx: dict[str, Any]) -> Hashable:
            return str(ctx[field]), epoch_ms(ctx["ts"]) // step * step

        context = self._sides(query.filter, field, [a, b], "trace.")
        fb: dict[str, Any] = {}
        if not carried(query.filter):  # feedback joined to the traces: no aggregation to add below
            tallies = self._tally_joined(sides, context, key)
        else:
            tallies = self._tally_before_trace(sides, key)
            misroutes = {"misroutes": {"filter": _term("correct", False)}}
            fb_aggs = {"g": {"terms": {"field": f"trace.{field}", "size": 2}, "aggs": {"b": {
                "date_histogram": {"field": "trace.ts", **hist}, "aggs": misroutes}}}}
            fb = self._search(Kind.FEEDBACK, size=0, aggs=fb_aggs, query=context)
        feedback = {k: (t.feedback, t.misroutes) for k, t in tallies.items()}
        for g in _buckets(fb):
            for h in g["b"]["buckets"]:
                was = feedback.get((str(g["key"]), h["key"]), (0, 0))
                feedback[(str(g["key"]), h["key"])] = (was[0] + int(h["doc_count"]),
                                                       was[1] + int(h["misroutes"]["doc_count"]))
        out: dict[str, list[BucketStats]] = {a: [], b: []}
        for g in _buckets(traces):
            for h in g["b"]["buckets"]:
                n, q = int(h["doc_count"]), h["latency"].get("values") or {}
                n_fb, n_mis = feedback.get((str(g["key"]), h["key"]), (0, 0))
                out[str(g["key"])].append(BucketStats(
                    start=datetime.fromtimestamp(h["key"] / 1000, UTC), requests=n, errors=h["errors"]["doc_count"],
                    fallbacks=h["fallbacks"]["doc_count"], fallback_rate=h["fallbacks"]["doc_count"] / n,
                    latency_p50_ms=q.get("50.0"), latency_p95_ms=q.get("95.0"), latency_p99_ms=q.get("99.0"),
                    cost=float(h["cost"]["value"] or 0.0), feedback=n_fb, misroutes=n_mis,
                    misroute_rate=n_mis / n_fb if n_fb else None))
        return out

    def _sides(self, flt: TraceFilter, field: str, sides: list[str], prefix: str = "") -> dict[str, Any]:
        """``flt``'s query on both sides, without the requests forced onto an arm (``prefix`` ``trace.``: feedback)."""
        query = self._query(flt, prefix)
        query["bool"]["filter"].append({"terms": {prefix + field: sides}})
        query["bool"]["must_not"] = [_term(prefix + "arm_forced", True)]
        return query

    def compare(self, query: CompareQuery) -> CompareReport:
        """Compare ``query.a`` with ``query.b`` over the query's window (see :mod:`ingest.experiments.compare`)."""
        sides, exact = self._arms(query)
        return build_report(query, sides[query.a], sides[query.b], exact)

    def arm_stats(self, query: CompareQuery) -> dict[str, ArmStats]:
        """Return both sides of ``query`` reduced to counts, sums and latency bins."""
        return self._arms(query)[0]

    def _arms(self, query: CompareQuery) -> tuple[dict[str, ArmStats], Exact]:
        """Both sides of ``query`` (:meth:`arm_stats`) and Elasticsearch's own p50 and p95 of each."""
        field = COMPARE_BY[query.by]
        sides = [query.a, query.b]
        window = [_span(query.start, query.end), {"terms": {field: sides}}]
        trace_query = {"bool": {"filter": window, "must_not": [_FORCED]}}
        aggs = {"g": {"terms": {"field": field, "size": 2}, "aggs": {
            "errors": {"filter": _term("outcome.status", "error")},
            "fallbacks": {"filter": _term("fallback_triggered", True)},
            "costed": {"filter": {"range": {"outcome.cost": {"gte": 0}}}},
            "cost": {"sum": {"field": "outcome.cost"}},
            "latency": {"percentiles": {"field": "outcome.total_ms", "percents": GRID}},
            "cost_grid": {"percentiles": {"field": "outcome.cost", "percents": GRID}},
        }}}
        traces = self._search(Kind.TRACE, query=trace_query, size=0, aggs=aggs)
        fb_query = {"bool": {"filter": [_span(query.start, query.end, "trace."), {"terms": {f"trace.{field}": sides}}],
                             "must_not": [_term("trace.arm_forced", True)]}}
        fb_aggs = {"g": {"terms": {"field": f"trace.{field}", "size": 2}, "aggs": {
            "misroutes": {"filter": _term("correct", False)},
            "expected": {"terms": {"field": "expected_model", "size": 1000}, "aggs": {
                "routed": {"terms": {"field": "trace.selected_model", "size": 1000}}}},
        }}}
        feedback = self._search(Kind.FEEDBACK, query=fb_query, size=0, aggs=fb_aggs)
        out = {v: ArmStats(value=v, latency=histogram_of({})) for v in sides}
        exact: dict[str, dict[float, float | None]] = {}
        for b in _buckets(traces):
            n, costed, grid = int(b["doc_count"]), int(b["costed"]["doc_count"]), b["latency"].get("values") or {}
            mean = float(b["cost"]["value"] or 0.0) / n if costed else None
            out[str(b["key"])] = ArmStats(
                value=str(b["key"]), requests=n, errors=int(b["errors"]["doc_count"]),
                fallbacks=int(b["fallbacks"]["doc_count"]), cost_n=costed, cost_mean=mean,
                cost_var=None if mean is None else _variance_from_grid(b["cost_grid"].get("values"), mean, n, costed),
                latency=histogram_of(_bins_from_grid(grid, n)),
            )
            exact[str(b["key"])] = {q: grid.get(f"{q * 100:.1f}") for q in QUANTILES.values()}
        forced = self._search(Kind.TRACE, query={"bool": {"filter": [*window, _FORCED]}}, size=0,
                              aggs={"g": {"terms": {"field": field, "size": 2}}})
        for b in _buckets(forced):
            side = out[str(b["key"])]
            out[side.value] = side.model_copy(update={"forced": int(b["doc_count"])})
        tallies = self._tally_before_trace(trace_query, lambda ctx: str(ctx[field]))
        for b in _buckets(feedback):
            tally = tallies.setdefault(str(b["key"]), VerdictTally())
            tally.feedback += int(b["doc_count"])
            tally.misroutes += int(b["misroutes"]["doc_count"])
            for e in b["expected"]["buckets"]:
                tally.expected += int(e["doc_count"])
                tally.expected_match += sum(int(r["doc_count"]) for r in e["routed"]["buckets"] if r["key"] == e["key"])
        for value, tally in tallies.items():
            side = out[str(value)]
            out[side.value] = side.model_copy(update={
                "feedback": tally.feedback, "misroutes": tally.misroutes,
                "expected": tally.expected, "expected_match": tally.expected_match,
            })
        return out, exact


def _buckets(resp: dict[str, Any]) -> list[dict[str, Any]]:
    return list((resp.get("aggregations") or {}).get("g", {}).get("buckets", []))

