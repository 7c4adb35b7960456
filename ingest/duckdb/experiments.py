"""The experiment reads of the DuckDB store: each side of a comparison reduced to an ``ArmStats``, and over time.

Two scans of the window's two sides (named queries of ``sql/experiments.sql``): counts per (side,
latency bin) with each side's exact cost mean and variance and exact latency quantiles (two grouping
sets of one scan), and the feedback joined on ``rid_hash``. At most ``2 × (k + 3)`` rows reach Python,
whatever the number of traces.
``experiment_series`` reads each side per time bucket from the traces, without forced requests.
"""

from __future__ import annotations

import math
import re
from abc import abstractmethod
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from ingest.duckdb.predicates import where
from ingest.duckdb.schema import sql_file
from ingest.experiments.compare import BINS, QUANTILES, Exact, build_report, histogram_of
from schemas.experiments import COMPARE_BY, ArmStats, CompareBy, CompareQuery, CompareReport
from schemas.queries import BUCKETS, AggregateQuery, BucketStats

__all__ = ["DuckDBExperiments", "experiment_queries"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


@cache
def experiment_queries() -> dict[str, str]:
    """Return the queries of ``sql/experiments.sql`` by name."""
    parts = re.split(r"^-- name: (\w+)\s*$", sql_file("experiments.sql"), flags=re.M)
    return {name: body.strip().rstrip(";") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


FORCED = "coalesce(arm_forced, false)"
"""A trace forced onto its arm by header (``arm_forced``; NULL in rows written before it: not forced).

A read-only file written before the column reads it as false (:mod:`ingest.duckdb.file_layout`)."""


def _sql(name: str, by: CompareBy, clause: str = "TRUE") -> str:
    return experiment_queries()[name].format(col=COMPARE_BY[by], forced=FORCED, where=clause)


class DuckDBExperiments:
    """``experiment_groups``, ``compare`` and ``experiment_series`` over the reader's ``_rows``."""

    @abstractmethod
    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Run ``sql`` with ``params`` and return its rows as dicts."""

    def experiment_groups(self, by: CompareBy, start: datetime, end: datetime) -> dict[str, int]:
        """Return the requests per arm, router version or policy hash in ``[start, end)``, busiest first."""
        return {str(r["grp"]): int(r["n"]) for r in self._rows(_sql("groups", by), [start, end])}

    def experiment_series(self, by: CompareBy, a: str, b: str, query: AggregateQuery) -> dict[str, list[BucketStats]]:
        """Return each side's buckets of ``query`` that hold a request, oldest first, as ``aggregate`` would.

        Requests forced onto an arm by header and their feedback are left out, as ``compare`` leaves
        them out: read from the traces (the per-minute rollup does not split them), one scan of both
        sides. ``query.filter`` bounds the window and may narrow it further (model, instance, ...).
        """
        assert query.filter.start is not None  # AggregateQuery checks it
        width = BUCKETS[query.bucket] * 1_000_000
        base = (query.filter.start - _EPOCH) // _US // width * width
        clause, params = where(query.filter)
        params = [base, width, *params, a, b]
        out: dict[str, list[BucketStats]] = {a: [], b: []}
        for r in self._rows(_sql("series", by, clause), [*params, *params]):
            q = r["q"] or [None, None, None]
            out[str(r["grp"])].append(BucketStats(
                start=_EPOCH + (base + r["k"] * width) * _US, requests=r["requests"], errors=r["errors"],
                fallbacks=r["fallbacks"], fallback_rate=r["fallbacks"] / r["requests"], latency_p50_ms=q[0],
                latency_p95_ms=q[1], latency_p99_ms=q[2], cost=float(r["cost"]), feedback=r["feedback"],
                misroutes=r["misroutes"], misroute_rate=r["misroutes"] / r["feedback"] if r["feedback"] else None,
            ))
        return out

    def compare(self, query: CompareQuery) -> CompareReport:
        """Compare ``query.a`` with ``query.b`` over the query's window (see :mod:`ingest.experiments.compare`)."""
        sides, exact = self._arms(query)
        return build_report(query, sides[query.a], sides[query.b], exact)

    def arm_stats(self, query: CompareQuery) -> dict[str, ArmStats]:
        """Return both sides of ``query`` reduced to counts, sums and latency bins."""
        return self._arms(query)[0]

    def _arms(self, query: CompareQuery) -> tuple[dict[str, ArmStats], Exact]:
        """Both sides of ``query`` (:meth:`arm_stats`) and their exact latency quantiles."""
        span = [query.start, query.end, query.a, query.b]
        bins = BINS
        figures: dict[str, dict[str, Any]] = {v: {"value": v} for v in (query.a, query.b)}
        hist: dict[str, dict[int, int]] = {query.a: {}, query.b: {}}
        exact: dict[str, dict[float, float | None]] = {query.a: {}, query.b: {}}
        for r in self._rows(_sql("arm_bins", query.by),
                            [bins.lo, bins.lo, bins.lo, math.log(bins.ratio), bins.k + 1, *span]):
            f = figures[r["grp"]]
            if r["side_row"]:  # the side's own grouping set: its cost moments and its forced requests
                f.update(cost_mean=r["mean"], cost_var=r["var"], forced=int(r["forced"]))
                exact[r["grp"]] = dict(zip(QUANTILES.values(), r["q"] or [None, None], strict=True))
                continue
            if r["bin"] < 0:  # the side's forced requests: counted on its own row only
                continue
            for key in ("n", "errors", "fallbacks", "cost_n"):
                f[key] = f.get(key, 0) + int(r[key])
            hist[r["grp"]][int(r["bin"])] = int(r["n"])
        for r in self._rows(_sql("arm_feedback", query.by), span):
            figures[r["grp"]].update({k: int(r[k]) for k in ("feedback", "misroutes", "expected", "expected_match")})
        return {v: ArmStats(
            value=v, requests=f.get("n", 0), errors=f.get("errors", 0), fallbacks=f.get("fallbacks", 0),
            cost_n=f.get("cost_n", 0), cost_mean=f.get("cost_mean"), cost_var=f.get("cost_var"),
            latency=histogram_of(hist[v], bins), feedback=f.get("feedback", 0), misroutes=f.get("misroutes", 0),
            expected=f.get("expected", 0), expected_match=f.get("expected_match", 0), forced=f.get("forced", 0),
        ) for v, f in figures.items()}, exact
