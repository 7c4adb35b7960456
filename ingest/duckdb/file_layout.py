"""Reading a DuckDB file that lacks columns today's layout has: one written by an older RouteLens, opened read-only.

Opened read-write, a file is migrated first (:mod:`ingest.duckdb.schema`); opened read-only (offline
analysis of a copy) it keeps the columns it was written with, and a read naming a column added
since would fail to bind. :class:`FileLayout` learns, once per table, what the file's table lacks
of the layout the code derives now (the models' storage schema and the derived columns of
:mod:`ingest.duckdb.derived`), at any depth: a column, or a field of a struct or of a list's structs.
A read naming such a table then runs over a common table expression of the same name that adds
what is missing: NULL of the derived type, or the trace's scalar default
(:func:`ingest.record_sink.scalar_defaults`: a trace stored before ``arm_forced`` existed was not
forced), a derived column computed by its own expression (``rid_hash`` is ``hash(request_id)``,
``constraint_hits`` the hits of :mod:`ingest.duckdb.derived`). The expression is inlined (``NOT
MATERIALIZED``): DuckDB pushes the query's filters and projections through it into the table scan,
so only the columns a read names are read. A table that lacks nothing is read as it is; nothing is
added to the SQL of a file of today's layout.

A column the file holds in an older form that today's replaces with another type
(:data:`ingest.duckdb.schema.RETYPED`: ``probe_results.ok`` became ``verdict``) reads as today's,
computed from the old one by the expression the migration uses. Other columns whose type changed
(not merely gained fields) are read as stored, as before: the rows are cleaned into the models
(:func:`ingest.codec.stored_rows.clean`), and a NULL where the model has no None falls back to the
field's default.

Feedback holds one verdict per request id (``feedback_request_id_key``). A file written before that
rule may hold more than one on a request; opened read-write it is migrated (the later ones move to
the quarantine: :mod:`ingest.duckdb.schema`), opened read-only it cannot be. Such a file (without
the index, with a request holding two verdicts) reads ``feedback`` as the migration would leave it:
each request's first verdict, by ``ts`` then ``feedback_id``. Its per-minute rollup counted every
verdict, so ``rollup_through`` is hidden too (``routelens_meta`` reads without it): every read is
answered from the traces, as on a file never rolled up.
"""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa

from ingest.codec.to_arrow import parse_schema
from ingest.duckdb.derived import DERIVED, hits_expression
from ingest.duckdb.schema import RETYPED, duckdb_type
from ingest.kinds import KINDS
from ingest.record_sink import scalar_defaults

__all__ = ["FileLayout"]

_SCHEMAS = {info.table: info.kind for info in KINDS.values()}  # the derived columns' tables are among them
_META = "routelens_meta"
_NAMED = re.compile(r"\b(" + "|".join(sorted([*_SCHEMAS, _META])) + r")\b")
# A file from before one verdict per request: its feedback read as each request's first verdict, its rollup unread.
_FIRST_VERDICT = ("SELECT * FROM ({rows}) "
                  "QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY ts, feedback_id) = 1")
_UNSEALED = "SELECT * FROM {source} WHERE key <> 'rollup_through'"
_LEAD = re.compile(r"(?:\s*--[^\n]*\n)*\s*")  # comments before the statement
_HEAD = re.compile(r"(?i)(with(?:\s+recursive)?\b)|(select\b)")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: bool | int | float | str) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + value.replace("'", "''") + "'"


def _defaults(table: str) -> dict[str, bool | int | float | str]:
    """Values a missing column of ``table`` reads as, instead of NULL."""
    if table != "traces":
        return {}
    # ``detail``: a trace from before the column kept its candidates' detail (as the v1 upgrade sets it).
    return {**scalar_defaults(), "detail": True}


def _filled(con: duckdb.DuckDBPyConnection, expr: str, have: pa.DataType, want: pa.DataType,
            depth: int = 0) -> str | None:
    """``expr`` (of type ``have``) with the struct fields ``want`` has and ``have`` lacks added as NULLs.

    None when nothing is missing. Fields ``have`` holds beyond ``want`` are kept.
    """
    if pa.types.is_list(have) and pa.types.is_list(want):
        var = f"x{depth}"
        inner = _filled(con, var, have.value_type, want.value_type, depth + 1)
        return None if inner is None else f"list_transform({expr}, lambda {var}: {inner})"
    if not (pa.types.is_struct(have) and pa.types.is_struct(want)):
        return None
    parts, changed = [], False
    for field in want:
        i = have.get_field_index(field.name)
        own = f"{expr}.{_quote(field.name)}"
        if i < 0:
            parts.append(f"{_quote(field.name)} := NULL::{duckdb_type(con, field.type)}")
            changed = True
            continue
        sub = _filled(con, own, have.field(i).type, field.type, depth)
        changed = changed or sub is not None
        parts.append(f"{_quote(field.name)} := {sub or own}")
    if not changed:
        return None
    parts += [f"{_quote(f.name)} := {expr}.{_quote(f.name)}" for f in have if want.get_field_index(f.name) < 0]
    return f"CASE WHEN {expr} IS NULL THEN NULL ELSE struct_pack({', '.join(parts)}) END"


def _source(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """``table`` qualified: the expression reading it takes the table's name."""
    db, schema = con.execute("SELECT current_database(), current_schema()").fetchall()[0]
    return f"{_quote(db)}.{_quote(schema)}.{_quote(table)}"


def _holds_later_verdicts(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the file's feedback holds two verdicts on a request (a file from before ``feedback_request_id_key``)."""
    indexed = con.execute("SELECT count(*) FROM duckdb_indexes() WHERE database_name = current_database() "
                          "AND table_name = 'feedback' AND index_name = 'feedback_request_id_key'").fetchall()[0][0]
    if indexed:
        return False
    try:
        return bool(con.execute("SELECT count(*) > count(DISTINCT request_id) FROM feedback").fetchall()[0][0])
    except duckdb.CatalogException:
        return False  # a file from before the table


def _table_expression(con: duckdb.DuckDBPyConnection, table: str) -> str | None:
    """The SELECT reading ``table`` with today's columns, or None when it lacks none (or does not exist)."""
    try:
        have = con.sql(f"SELECT * FROM {_quote(table)} LIMIT 0").to_arrow_table().schema
    except duckdb.CatalogException:
        return None  # a file from before the table: the readers answer nothing from it
    want = parse_schema(_SCHEMAS[table])
    defaults = _defaults(table)
    retyped = {column: expr for column, (old, expr) in RETYPED.get(table, {}).items() if have.get_field_index(old) >= 0}
    replaced, added = [], []
    for field in want:
        i = have.get_field_index(field.name)
        if i < 0:
            value = retyped.get(field.name) or (_literal(defaults[field.name]) if field.name in defaults else "NULL")
            added.append(f"CAST({value} AS {duckdb_type(con, field.type)}) AS {_quote(field.name)}")
        elif (expr := _filled(con, _quote(field.name), have.field(i).type, field.type)) is not None:
            replaced.append(f"{expr} AS {_quote(field.name)}")
    derived = [f"{hits_expression() if expr == '{hits}' else expr} AS {_quote(column)}"
               for column, _, expr in DERIVED.get(table, []) if have.get_field_index(column) < 0]
    if not (replaced or added or derived):
        return None
    source = _source(con, table)
    star = f"* REPLACE ({', '.join(replaced)})" if replaced else "*"
    inner = f"SELECT {', '.join([star, *added])} FROM {source}"
    # The derived columns are computed from the completed row (the hits read the candidates' fields).
    return f"SELECT *, {', '.join(derived)} FROM ({inner})" if derived else inner


class FileLayout:
    """What one file's tables lack of today's layout, learned on the first read, and the reads that supply it.

    One per connection (a file opened read-only cannot change under it; one opened read-write was
    migrated before its first read, and lacks nothing); safe to share between threads (learning
    twice gives the same answer).
    """

    def __init__(self) -> None:
        self._tables: dict[str, str] | None = None  # table -> the SELECT reading it, for those lacking something

    def adapt(self, con: duckdb.DuckDBPyConnection, sql: str) -> str:
        """Return ``sql`` (a SELECT or WITH query) reading each table it names with today's columns.

        Args:
            con: A connection (or cursor) to the file, to learn its tables on first use.
            sql: The query; any other statement, or one over a file lacking nothing, is returned unchanged.
        """
        tables = self._tables
        if tables is None:
            tables = self._tables = _learn(con)
        if not tables:
            return sql
        lead = _LEAD.match(sql)
        start = lead.end() if lead else 0
        head = _HEAD.match(sql, start)
        ctes = [f"{_quote(t)} AS NOT MATERIALIZED ({tables[t]})" for t in dict.fromkeys(_NAMED.findall(sql))
                if t in tables]
        if head is None or not ctes:
            return sql
        if head.group(1):  # the query's own WITH: ours come first, its own may read them
            return f"{sql[:head.end()]} {', '.join(ctes)}, {sql[head.end():].lstrip()}"
        return f"{sql[:start]}WITH {', '.join(ctes)} {sql[start:]}"


def _learn(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The SELECT reading each table of the file that lacks something of today's layout."""
    probe = con.cursor()  # its own: ``con`` may hold a result not fetched to the end
    try:
        tables = {table: expr for table in _SCHEMAS if (expr := _table_expression(probe, table)) is not None}
        if _holds_later_verdicts(probe):
            tables["feedback"] = _FIRST_VERDICT.format(rows=tables.get("feedback") or
                                                       f"SELECT * FROM {_source(probe, 'feedback')}")
            tables[_META] = _UNSEALED.format(source=_source(probe, _META))
        return tables
    finally:
        probe.close()
