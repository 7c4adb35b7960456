"""The SQL pieces every DuckDB read shares: the named queries and the WHERE clause of a TraceFilter.

Values are always ``?`` parameters; the SQL text is assembled only from the named queries in
``sql/queries.sql`` and the fixed predicates below.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ingest.duckdb.schema import sql_file
from schemas.queries import UNSET_FIELDS, TraceFilter

__all__ = ["PREDICATES", "named_queries", "where"]

# TraceFilter field -> predicate on `traces`. The latency range is the gateway's total time.
PREDICATES: dict[str, str] = {
    "start": "ts >= ?",
    "end": "ts < ?",
    "router_version": "router_version = ?",
    "experiment_arm": "experiment_arm = ?",
    "rule": "rule = ?",
    "model": "selected_model = ?",
    "instance": "selected_instance = ?",
    "fallback": "fallback_triggered = ?",
    "outcome": "outcome.status = ?",
    "query_hash": "query_hash = ?",
    "otel_trace_id": "otel_trace_id = ?",
    "min_latency_ms": "outcome.total_ms >= ?",
    "max_latency_ms": "outcome.total_ms < ?",
    # constraint_hits is the JSON [[constraint, instance, model, verdict], ...] the sink derives; the
    # name's pattern (TraceFilter) holds no LIKE wildcard or quote. A row written around the sink
    # has none until derive_missing fills it.
    "violation": "constraint_hits LIKE '%[\"' || ? || '\",%'",
}


@cache
def named_queries(file: str = "queries.sql") -> dict[str, str]:
    """Return the queries of ``sql/<file>`` by name."""
    parts = re.split(r"^-- name: (\w+)\s*$", sql_file(file), flags=re.M)
    return {name: body.strip().rstrip(";") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def where(flt: TraceFilter) -> tuple[str, list[Any]]:
    """Return the conjunction of ``flt``'s predicates on ``traces`` and its parameters."""
    clauses, params = ["TRUE"], []
    for name, clause in PREDICATES.items():
        value = getattr(flt, name)
        if value is not None:
            clauses.append(clause)
            params.append(value.value if hasattr(value, "value") else value)
    clauses += [f"{UNSET_FIELDS[name]} IS NULL" for name in flt.unset or ()]  # the trace's own column names
    return " AND ".join(clauses), params
