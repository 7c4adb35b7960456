"""The columns DuckDB derives at write time: ``traces.constraint_hits`` and ``rid_hash`` (traces, feedback).

The constraints page counts, per (constraint, instance, model), how often a hard violation removed
a candidate and whether the removal was decisive. Computed from the nested candidates at query
time, that reads every candidate of every trace in the window (about 3 s per million traces on two
cores). The sink computes it once per trace instead, with the same SQL, into a short JSON text
(``sql/constraint_hits.sql``); a window's counts are then a ``GROUP BY`` over that text (a few
dozen distinct values) and the parsing of each distinct value.

``rid_hash`` is ``hash(request_id)`` (64 bits) on both tables: the buckets' misroute counts join
feedback to the window's traces on it instead of on ``request_id``, whose strings cost ten times
as much to scan (a collision, about 5e-8 over 10M traces and 100k feedback, miscounts one record).

The columns are not part of the models (``ingest.codec.storage_schema``): Elasticsearch does not
store them, reads ignore them. A table without them gains them, backfilled, on migration. A row
written around the sink (raw SQL) has NULLs: ``constraint_hits`` is then computed at query time,
but its feedback is not counted in the buckets until :func:`derive_missing` fills it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import resources

import duckdb

__all__ = ["DERIVED", "HITS_COLUMN", "add_derived_columns", "derive_missing", "hits_expression", "select_list"]

HITS_COLUMN = "constraint_hits"


@cache
def hits_expression() -> str:
    """Return the SQL expression of ``constraint_hits`` over a trace row (its comments removed)."""
    text = resources.files("ingest.duckdb").joinpath("sql/constraint_hits.sql").read_text(encoding="utf-8")
    return re.sub(r"^--.*$\n?", "", text, flags=re.M).strip()


_RID_HASH = ("rid_hash", "UBIGINT", "hash(request_id)")
# table -> (column, type, expression over the row), fixed text only.
DERIVED: dict[str, list[tuple[str, str, str]]] = {
    "traces": [(HITS_COLUMN, "VARCHAR", "{hits}"), _RID_HASH],
    "feedback": [_RID_HASH],
}


def _expr(expr: str) -> str:
    return hits_expression() if expr == "{hits}" else expr


def select_list(table: str) -> str:
    """Return the ``SELECT`` list inserting a batch into ``table``: its columns and the derived ones."""
    return ", ".join(["*", *(f"{_expr(e)} AS {c}" for c, _, e in DERIVED.get(table, []))])


def add_derived_columns(con: duckdb.DuckDBPyConnection, table: str, drop_dependents: Callable[[], list[str]],
                        *, fresh: bool = False) -> list[str]:
    """Add and backfill the derived columns ``table`` lacks; return the migration statements.

    ``drop_dependents`` drops the indexes and views DuckDB will not alter a table under (the caller
    creates them again). A ``fresh`` (just created, empty) table gains the columns and no migration.
    """
    have = {r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ?",
                                      [table]).fetchall()}
    missing = [(c, t, e) for c, t, e in DERIVED.get(table, []) if c not in have]
    if not missing:
        return []
    done = [] if fresh else drop_dependents()
    for column, dtype, expr in missing:
        stmts = [f'ALTER TABLE "{table}" ADD COLUMN {column} {dtype}']
        if not fresh:
            stmts.append(f'UPDATE "{table}" SET {column} = {_expr(expr)}')
        for stmt in stmts:
            con.execute(stmt)
        if not fresh:
            done += stmts
    return done


def derive_missing(con: duckdb.DuckDBPyConnection) -> int:
    """Fill every derived column left NULL by a writer that bypassed the sink; return the rows touched."""
    touched = 0
    for table, columns in DERIVED.items():
        for column, _, expr in columns:
            rows = con.execute(f'UPDATE "{table}" SET {column} = {_expr(expr)} WHERE {column} IS NULL').fetchall()
            touched += int(rows[0][0]) if rows else 0
    return touched
