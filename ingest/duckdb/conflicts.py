"""Traces whose ``request_id`` is taken already: the same trace again, or a different one under its id.

A trace delivered twice (a spool replayed after a crash, a file imported twice, a relay retried)
is stored once and counted a duplicate. A *different* trace under an id already stored is no
duplicate: counting it as one would drop it silently. It is quarantined with its reason instead.

This runs only on the sink's conflict path: the plain ``INSERT`` of a batch failed on the unique
id, so some of its ids are taken. The batch's rows are then compared, column by column in DuckDB
(``IS NOT DISTINCT FROM``, nested columns included), with the stored row of the same id, or with
the batch's first row of that id when two rows of the batch share one. A trace stored with its
candidates' detail and delivered again without it (the detail sample, ``storage.detail_share``,
changed in between) is the same trace: its candidates are compared only when both carry detail.
A row stored before a column was added (NULL there) and the same trace again (the field's default)
are the same trace too.
"""

from __future__ import annotations

from functools import cache

import duckdb
import orjson
import pyarrow as pa

from ingest.kinds import Kind
from ingest.record_sink import SAMPLED, PreparedBatch, Rejected, conflict_reason, scalar_defaults

__all__ = ["SplitTraces", "split_conflicts"]

_ROW = "__routelens_row"
_DETAIL = "detail"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@cache
def _defaults() -> dict[str, str]:
    """SQL literals of the trace's scalar defaults (:func:`ingest.record_sink.scalar_defaults`)."""
    out: dict[str, str] = {}
    for name, value in scalar_defaults().items():
        if isinstance(value, bool):
            out[name] = "TRUE" if value else "FALSE"
        elif isinstance(value, str):
            out[name] = "'" + value.replace("'", "''") + "'"
        else:
            out[name] = repr(value)
    return out


def _column(row: str, name: str) -> str:
    default = _defaults().get(name)
    column = f"{row}.{_quote(name)}"
    return column if default is None else f"coalesce({column}, {default})"


def _same(columns: list[str], a: str, b: str) -> str:
    """SQL: rows ``a`` and ``b`` hold the same trace."""
    terms = []
    for name in columns:
        same = f"{_column(a, name)} IS NOT DISTINCT FROM {_column(b, name)}"
        if name in SAMPLED and _DETAIL in columns:
            same = f"({a}.{_DETAIL} IS DISTINCT FROM {b}.{_DETAIL} OR {same})"
        elif name == _DETAIL:
            continue
        terms.append(same)
    return " AND ".join(terms) or "TRUE"


class SplitTraces:
    """A trace table split on the conflict path.

    Attributes:
        fresh: The rows to insert: one per id, none stored yet.
        duplicates: Rows that are the same trace as one stored or kept (counted, not stored).
        rejected: Rows that are a different trace under an id taken (quarantined).
    """

    def __init__(self, fresh: pa.Table, duplicates: int, rejected: list[Rejected]) -> None:
        self.fresh = fresh
        self.duplicates = duplicates
        self.rejected = rejected


def _payloads(prepared: PreparedBatch) -> list[bytes]:
    """The payloads of the trace table's rows, in order: the batch's traces less those the preparation refused."""
    refused = {id(r.payload) for r in prepared.rejected if r.kind is Kind.TRACE}
    return [p for p in prepared.batch.payloads.get(Kind.TRACE, []) if id(p) not in refused]


def _last_of(prepared: PreparedBatch, request_id: str) -> bytes:
    """The last payload of the batch with this id (never needed while rows and payloads align, as they do)."""
    found = [p for p in prepared.batch.payloads.get(Kind.TRACE, []) if orjson.loads(p).get("request_id") == request_id]
    return found[-1] if found else b"{}"


def split_conflicts(cur: duckdb.DuckDBPyConnection, table: pa.Table, prepared: PreparedBatch) -> SplitTraces:
    """Split a batch's traces (``table``) into those to insert, duplicates and conflicts (in the caller's transaction).

    Raises:
        duckdb.Error: As the queries do (the caller's transaction fails).
    """
    numbered = table.append_column(_ROW, pa.array(range(table.num_rows), pa.int64()))
    columns = [name for name in table.column_names if name != _ROW]
    cur.register("incoming", numbered)
    try:
        rows = cur.execute(f"""
            WITH firsts AS (SELECT request_id, min({_ROW}) AS first FROM incoming GROUP BY request_id)
            SELECT i.{_ROW}, i.request_id,
                   CASE WHEN s.request_id IS NOT NULL THEN {_same(columns, "i", "s")}
                        ELSE {_same(columns, "i", "f")} END AS same
            FROM incoming i
            JOIN firsts USING (request_id)
            JOIN incoming f ON f.{_ROW} = firsts.first
            LEFT JOIN traces s ON s.request_id = i.request_id
            WHERE s.request_id IS NOT NULL OR i.{_ROW} <> firsts.first
        """).fetchall()
    finally:
        cur.unregister("incoming")
    if not rows:
        return SplitTraces(table, 0, [])
    payloads = _payloads(prepared)
    aligned = len(payloads) == table.num_rows
    rejected: list[Rejected] = []
    for row, request_id, same in rows:
        if not same:
            payload = payloads[row] if aligned else _last_of(prepared, str(request_id))
            rejected.append(Rejected(Kind.TRACE, payload, conflict_reason(str(request_id))))
    keep = [True] * table.num_rows
    for row, _, _ in rows:
        keep[row] = False
    return SplitTraces(table.filter(pa.array(keep)), len(rows) - len(rejected), rejected)
