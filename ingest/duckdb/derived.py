"""The one column DuckDB derives from a trace at write time: ``traces.constraint_hits``.

The constraints page counts, per (constraint, instance, model), how often a hard violation removed
a candidate and whether the removal was decisive. Computed from the nested candidates at query
time, that reads every candidate of every trace in the window (about 3 s per million traces on two
cores). The sink computes it once per trace instead, with the same SQL, into a short JSON text
(``sql/constraint_hits.sql``); a window's counts are then a ``GROUP BY`` over that text (a few
dozen distinct values) and the parsing of each distinct value.

The column is not part of the models (``ingest.codec.storage_schema``): Elasticsearch does not
store it, reads ignore it. A table without it gains it and is backfilled on migration; a row
written around the sink (NULL) is computed at query time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import resources

import duckdb

__all__ = ["HITS_COLUMN", "add_hits_column", "hits_expression"]

HITS_COLUMN = "constraint_hits"


@cache
def hits_expression() -> str:
    """Return the SQL expression of ``constraint_hits`` over a trace row (its comments removed)."""
    text = resources.files("ingest.duckdb").joinpath("sql/constraint_hits.sql").read_text(encoding="utf-8")
    return re.sub(r"^--.*$\n?", "", text, flags=re.M).strip()


def add_hits_column(con: duckdb.DuckDBPyConnection, drop_dependents: Callable[[], list[str]],
                    *, fresh: bool = False) -> list[str]:
    """Add and backfill ``traces.constraint_hits`` when the table lacks it; return the migration statements.

    ``drop_dependents`` drops the indexes and views DuckDB will not alter a table under (the caller
    creates them again). A ``fresh`` (just created, empty) table gains the column and no migration.
    """
    have = con.execute("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'traces' AND column_name = ?",
                       [HITS_COLUMN]).fetchall()
    if have[0][0]:
        return []
    if fresh:
        con.execute(f"ALTER TABLE traces ADD COLUMN {HITS_COLUMN} VARCHAR")
        return []
    done = drop_dependents()
    for stmt in (f"ALTER TABLE traces ADD COLUMN {HITS_COLUMN} VARCHAR",
                 f"UPDATE traces SET {HITS_COLUMN} = {hits_expression()}"):
        con.execute(stmt)
        done.append(stmt)
    return done
