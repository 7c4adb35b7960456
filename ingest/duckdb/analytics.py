"""The analytics reads of the DuckDB store: constraint binding counts and misroutes.

Each is a named query of ``sql/queries.sql`` with the filter's fixed predicates; every value is a
parameter. Constraint counts group the traces by their derived ``constraint_hits``
(:mod:`ingest.duckdb.derived`); see :mod:`ingest.analytics` for when a removal can be decisive.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import orjson

from ingest.analytics import ConstraintTally
from ingest.duckdb.derived import hits_expression
from ingest.duckdb.predicates import named_queries, where
from ingest.trace_store import clamp_limit
from schemas.queries import ConstraintStat, Misroute, TraceFilter

__all__ = ["DuckDBAnalytics"]

_PAGES = 4  # pages of feedback matched by index before the join


class DuckDBAnalytics:
    """``constraint_stats`` and ``misroutes`` over the reader's ``_rows``."""

    @abstractmethod
    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Run ``sql`` with ``params`` and return its rows as dicts."""

    def constraint_stats(self, flt: TraceFilter) -> list[ConstraintStat]:
        """Return per (constraint, instance, model) removals, decisive and undecided ones, soft violations."""
        clause, params = where(flt)
        rows = self._rows(named_queries()["constraint_keys"].format(where=clause, hits=hits_expression()),
                          [*params, *params])
        tally = ConstraintTally()
        for row in rows:
            for constraint, instance, model, verdict in orjson.loads(row["hits"]):
                tally.count(constraint, instance, model, verdict, int(row["n"]))
        return tally.stats()

    def misroutes(self, flt: TraceFilter, limit: int = 100) -> list[Misroute]:
        """Return feedback with ``correct=false`` on traces matching ``flt``, newest feedback first.

        Pages of the newest such feedback (twice ``limit``, doubling) are matched to their traces by
        index; after ``_PAGES`` pages that did not fill ``limit`` (a filter that keeps few of them),
        one join over the window answers instead.
        """
        limit = clamp_limit(limit)
        clause, params = where(flt)
        out: list[Misroute] = []
        after: list[Any] = []
        size = 2 * limit
        for _ in range(_PAGES):
            keyset = "(ts, feedback_id) < (?, ?)" if after else "TRUE"
            page = self._rows(named_queries()["misroute_feedback"].format(after=keyset), [*after, size])
            if not page:
                return out
            ids = sorted({r["request_id"] for r in page})
            sql = named_queries()["misroute_traces"].format(marks=", ".join("?" for _ in ids), where=clause)
            traces = {r["request_id"]: r for r in self._rows(sql, [*ids, *params])}
            for fb in page:
                trace = traces.get(fb["request_id"])
                if trace is not None:
                    out.append(_misroute({**fb, **trace}))
                    if len(out) == limit:
                        return out
            if len(page) < size:
                return out
            after, size = [page[-1]["ts"], page[-1]["feedback_id"]], 2 * size
        rows = self._rows(named_queries()["misroutes"].format(where=clause), [*params, limit])
        return [_misroute(r) for r in rows]


def _misroute(row: dict[str, Any]) -> Misroute:
    return Misroute.model_validate({k: v for k, v in row.items() if v is not None and k != "feedback_id"})
