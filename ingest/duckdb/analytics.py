"""The analytics reads of the DuckDB store: constraint binding counts and misroutes.

Each is a named query of ``sql/queries.sql`` with the filter's fixed predicates; every value is a
parameter. Constraint counts group the traces by their derived ``constraint_hits``
(:mod:`ingest.duckdb.derived`); see :mod:`ingest.analytics` for when a removal can be decisive.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import duckdb
import orjson

from ingest.analytics import ConstraintTally
from ingest.duckdb.derived import hits_expression
from ingest.duckdb.predicates import named_queries, where
from ingest.trace_store import clamp_limit
from schemas.queries import ConstraintStat, Misroute, TraceFilter

__all__ = ["DuckDBAnalytics"]


class DuckDBAnalytics:
    """``constraint_stats`` and ``misroutes`` over the reader's ``_rows``."""

    @abstractmethod
    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Run ``sql`` with ``params`` and return its rows as dicts."""

    def constraint_stats(self, flt: TraceFilter) -> list[ConstraintStat]:
        """Return per (constraint, instance, model) removals, decisive and undecided ones, soft violations."""
        clause, params = where(flt)
        try:
            rows = self._rows(named_queries()["constraint_keys"].format(where=clause, hits=hits_expression()),
                              [*params, *params])
        except duckdb.BinderException:  # a read-only file from before the derived column
            rows = self._rows(named_queries()["constraint_keys_legacy"].format(where=clause, hits=hits_expression()),
                              params)
        tally = ConstraintTally()
        for row in rows:
            for constraint, instance, model, verdict in orjson.loads(row["hits"]):
                tally.count(constraint, instance, model, verdict, int(row["n"]))
        return tally.stats()

    def misroutes(self, flt: TraceFilter, limit: int = 100) -> list[Misroute]:
        """Return feedback with ``correct=false`` on traces matching ``flt``, newest feedback first."""
        clause, params = where(flt)
        rows = self._rows(named_queries()["misroutes"].format(where=clause), [*params, clamp_limit(limit)])
        return [Misroute.model_validate({k: v for k, v in r.items() if v is not None}) for r in rows]
