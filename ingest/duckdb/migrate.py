"""The generic migration: a table compared with the schema the code derives now, column by column.

A missing column is added; a column whose type changed is rewritten with a generated conversion,
recursively into structs and lists (fields that still exist keep their values, new fields are NULL,
fields whose type became incompatible are NULL); columns the models dropped stay. The fields a
table holds that today's models lack (a newer version wrote them) are found here too; what to do
about them, and the order of the tables, is :func:`ingest.duckdb.schema.ensure_schema`'s.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

__all__ = ["duckdb_type"]


def duckdb_type(con: duckdb.DuckDBPyConnection, dtype: pa.DataType) -> str:
    """Return DuckDB's spelling of an Arrow type (asked from DuckDB, not typed by hand)."""
    probe = pa.schema([pa.field("x", dtype)]).empty_table()  # noqa: F841  (replacement scan)
    return str(con.sql("DESCRIBE SELECT * FROM probe").fetchall()[0][1])


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _convert(expr: str, src: pa.DataType, dst: pa.DataType, con: duckdb.DuckDBPyConnection) -> str:
    """SQL turning ``expr`` of type ``src`` into ``dst`` (see the module docstring)."""
    if src.equals(dst):
        return expr
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        have = {f.name: f.type for f in src}
        parts = [
            f"{_quote(f.name)} := "
            + (_convert(f"{expr}.{_quote(f.name)}", have[f.name], f.type, con) if f.name in have
               else f"NULL::{duckdb_type(con, f.type)}")
            for f in dst
        ]
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE struct_pack({', '.join(parts)}) END"
    if pa.types.is_list(src) and pa.types.is_list(dst):
        inner = _convert("x", src.value_type, dst.value_type, con)
        if inner.startswith("NULL::"):
            return f"NULL::{duckdb_type(con, dst)}"
        return f"list_transform({expr}, lambda x: {inner})"
    if pa.types.is_struct(src) or pa.types.is_list(src) or pa.types.is_struct(dst) or pa.types.is_list(dst):
        return f"NULL::{duckdb_type(con, dst)}"
    return f"TRY_CAST({expr} AS {duckdb_type(con, dst)})"


def _unknown(have: pa.Schema | pa.StructType, want: pa.Schema | pa.StructType, prefix: str = "") -> list[str]:
    """The fields ``have`` holds (at any depth: structs, lists of structs) that ``want`` lacks."""
    out: list[str] = []
    for field in have:
        i = want.get_field_index(field.name)
        if i < 0:
            out.append(prefix + field.name)
            continue
        src, dst = field.type, want.field(i).type
        while pa.types.is_list(src) and pa.types.is_list(dst):
            src, dst = src.value_type, dst.value_type
        if pa.types.is_struct(src) and pa.types.is_struct(dst):
            out += _unknown(src, dst, f"{prefix}{field.name}.")
    return out


def _current(con: duckdb.DuckDBPyConnection, table: str) -> pa.Schema | None:
    exists = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]).fetchall()
    if not exists[0][0]:
        return None
    return con.sql(f"SELECT * FROM {_quote(table)} LIMIT 0").to_arrow_table().schema


def _drop_dependents(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """DuckDB cannot alter a table that has indexes or views on it: drop them (both come back)."""
    done = []
    for (name,) in con.execute("SELECT index_name FROM duckdb_indexes() WHERE table_name = ?", [table]).fetchall():
        done.append(f"DROP INDEX {_quote(name)}")
    for (name,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        done.append(f"DROP VIEW IF EXISTS {_quote(name)}")
    for stmt in done:
        con.execute(stmt)
    return done


def _migrate(con: duckdb.DuckDBPyConnection, table: str, have: pa.Schema, want: pa.Schema) -> list[str]:
    done: list[str] = []
    for field in want:
        idx = have.get_field_index(field.name)
        if idx < 0:
            stmt = f"ALTER TABLE {_quote(table)} ADD COLUMN {_quote(field.name)} {duckdb_type(con, field.type)}"
        elif not have.field(idx).type.equals(field.type):
            conv = _convert(_quote(field.name), have.field(idx).type, field.type, con)
            stmt = (f"ALTER TABLE {_quote(table)} ALTER COLUMN {_quote(field.name)} "
                    f"TYPE {duckdb_type(con, field.type)} USING {conv}")
        else:
            continue
        if not done:
            done += _drop_dependents(con, table)
        con.execute(stmt)
        done.append(stmt)
    return done
