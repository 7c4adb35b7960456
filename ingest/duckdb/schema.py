"""Creating and migrating the DuckDB tables, all derived from the models.

A table that does not exist is created from its derived Arrow schema. A table that exists is
compared with the schema the code derives now, column by column and recursively into structs and
lists: a missing column is added, a column whose type changed is rewritten with a generated
conversion (fields that still exist keep their values, new fields are NULL, fields whose type
became incompatible are NULL, a reader then falls back to the model default), and columns the
models dropped stay (old data is not destroyed). ``traces`` also carries one column derived at
write time, outside the models (:mod:`ingest.duckdb.derived`). A column an older layout held in
place of one of today's, of a type the generic conversion cannot bridge (:data:`RETYPED`), is
rewritten into today's by its own expression and then dropped. Each statement is recorded in
``routelens_migrations`` and the layout version in ``routelens_meta``.

Feedback holds one verdict per request id (``feedback_request_id_key``): a file written before
that rule keeps each request's earliest verdict and moves the later ones to ``quarantine`` with
their reason (``sql/verdicts.sql``); the rollup is then rolled up again, as it counted them. The
table also gains :data:`ONE_VERDICT`, a column no model holds, so that a version from before the rule
refuses the file read-write (its check of the columns: :class:`NewerFile`) instead of writing it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from importlib import resources

import duckdb
import pyarrow as pa

from ingest.codec.to_arrow import parse_schema
from ingest.duckdb.derived import DERIVED, add_derived_columns
from ingest.kinds import KINDS
from ingest.record_sink import verdict_reason_parts
from schemas.common import ProbeVerdict
from schemas.version import SCHEMA_VERSION

__all__ = ["ONE_VERDICT", "RETYPED", "STORAGE_VERSION", "NewerFile", "duckdb_type", "ensure_schema", "sql_file",
           "transaction"]

log = logging.getLogger(__name__)
STORAGE_VERSION = 2  # 1: traces with inline candidate states and no `detail` column
RETYPED: dict[str, dict[str, tuple[str, str]]] = {
    # The first layout (before 2026-12-01) judged a probe run by ``ok`` (boolean), not a verdict:
    # true was a passing run (``ok``), false a failing one (``failed``; ``degraded`` did not exist yet).
    "probe_results": {"verdict": ("ok", f"CASE WHEN \"ok\" THEN '{ProbeVerdict.OK.value}' "
                                        f"WHEN NOT \"ok\" THEN '{ProbeVerdict.FAILED.value}' END")},
}
"""Per table, today's column -> (the older layout's column it replaces, SQL computing today's from it)."""
ONE_VERDICT = "one_verdict_per_request"
"""A ``feedback`` column outside the models, always NULL: the file is under the one-verdict rule.

A version from before the rule (before 2026-12-07) opened such a file as its own: each later verdict
it took hit ``feedback_request_id_key`` and was dropped unstored and unquarantined, yet counted in the
rollup (which then disagreed with the live reads for good). It refuses a column its models lack
(``written by a newer RouteLens: its feedback hold one_verdict_per_request``); read-only opens work."""


@cache
def sql_file(name: str) -> str:
    """Return the text of ``ingest/duckdb/sql/<name>`` (read once)."""
    return resources.files("ingest.duckdb").joinpath(f"sql/{name}").read_text(encoding="utf-8")


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


class NewerFile(Exception):
    """The file holds fields this version does not know: a newer RouteLens wrote it (never migrated back)."""

    def __init__(self, table: str, fields: list[str]) -> None:
        shown = ", ".join(fields[:8]) + (f" and {len(fields) - 8} more" if len(fields) > 8 else "")
        super().__init__(f"written by a newer RouteLens: its {table} hold {shown}, which this version does not "
                         "know; migrating it would drop them. Run the newer version, or read a copy with it")


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


def _bridge_retyped(con: duckdb.DuckDBPyConnection, table: str, have: pa.Schema, want: pa.Schema) -> list[str]:
    """Rewrite each :data:`RETYPED` column of ``table`` that the file holds in the old form; return the statements.

    Today's column is added and computed from the old one, which is then dropped (all it held is
    in the new one), so that a later open does not take it for a field of a newer version.
    """
    done: list[str] = []
    for column, (old, expr) in RETYPED.get(table, {}).items():
        if have.get_field_index(old) < 0 or have.get_field_index(column) >= 0:
            continue
        stmts = [f"ALTER TABLE {_quote(table)} ADD COLUMN {_quote(column)} "
                 f"{duckdb_type(con, want.field(column).type)}",
                 f"UPDATE {_quote(table)} SET {_quote(column)} = {expr}",
                 f"ALTER TABLE {_quote(table)} DROP COLUMN {_quote(old)}"]
        if not done:
            done += _drop_dependents(con, table)
        for stmt in stmts:
            con.execute(stmt)
        done += stmts
    return done


def ensure_schema(con: duckdb.DuckDBPyConnection, now: datetime | None = None) -> list[str]:
    """Create or migrate every table, index and view; return the migration statements run."""
    now = now or datetime.now(UTC)
    con.execute("SET TimeZone = 'UTC'")
    con.execute(sql_file("meta.sql"))
    applied: list[str] = []
    created: set[str] = set()
    with transaction(con):
        # traces last: upgrading layout 1 moves candidate states into instance_snapshots
        for info in sorted(KINDS.values(), key=lambda i: i.table == "traces"):
            want = parse_schema(info.kind)
            have = _current(con, info.table)
            if have is None:
                empty = want.empty_table()  # noqa: F841  (replacement scan)
                con.execute(f"CREATE TABLE {_quote(info.table)} AS SELECT * FROM empty")
                created.add(info.table)
            elif info.table == "traces" and have.get_field_index("detail") < 0:
                applied += _upgrade_v1_traces(con, have, want)
            else:
                if retyped := _bridge_retyped(con, info.table, have, want):
                    applied += retyped
                    have = con.sql(f"SELECT * FROM {_quote(info.table)} LIMIT 0").to_arrow_table().schema
                derived = {column for column, _, _ in DERIVED.get(info.table, [])} | {ONE_VERDICT}
                if unknown := [n for n in _unknown(have, want) if n not in derived]:
                    raise NewerFile(info.table, unknown)
                applied += _migrate(con, info.table, have, want)
        for table in DERIVED:
            applied += add_derived_columns(con, table, lambda t=table: _drop_dependents(con, t),  # type: ignore[misc]
                                           fresh=table in created)
        applied += _unique_indexes(con, created)
        applied += _one_verdict_per_request(con, created, now)
        applied += _mark_one_verdict(con, fresh="feedback" in created)
    # A second transaction: DuckDB checks a new unique index against rows updated in the same one.
    with transaction(con):
        con.execute(sql_file("indexes.sql"))
        con.execute(sql_file("views.sql"))
        for stmt in applied:
            con.execute("INSERT INTO routelens_migrations VALUES (?, ?, ?)", [STORAGE_VERSION, now, stmt])
        for key, value in (("schema_version", SCHEMA_VERSION), ("storage_version", STORAGE_VERSION)):
            con.execute("INSERT OR REPLACE INTO routelens_meta VALUES (?, ?)", [key, str(value)])
    for stmt in applied:
        log.warning("trace store migrated: %s", stmt)
    return applied


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Run the block in one transaction: committed at the end, rolled back on any exception."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # a failed COMMIT has already ended the transaction
        raise
    con.execute("COMMIT")


def _unique_indexes(con: duckdb.DuckDBPyConnection, created: set[str]) -> list[str]:
    """Before a unique id index is (re)created, keep one row per id (layout 1 allowed duplicates)."""
    have = {r[0] for r in con.execute("SELECT table_name FROM duckdb_indexes() WHERE is_unique").fetchall()}
    done = []
    for info in KINDS.values():
        if info.table in have or info.table in created:
            continue
        stmt = (f"DELETE FROM {_quote(info.table)} WHERE rowid NOT IN "
                f"(SELECT min(rowid) FROM {_quote(info.table)} GROUP BY {_quote(info.id_field)})")
        con.execute(stmt)
        done.append(stmt)
    return done


def _one_verdict_per_request(con: duckdb.DuckDBPyConnection, created: set[str], now: datetime) -> list[str]:
    """Before ``feedback_request_id_key`` is created: move every request's later verdicts to quarantine.

    Only a file written before the rule can hold them. The sealed rollup minutes counted them, so
    they are dropped with ``rollup_through``: the sink seals them again from the traces on open.
    """
    if "feedback" in created or con.execute(
            "SELECT count(*) FROM duckdb_indexes() WHERE index_name = 'feedback_request_id_key'").fetchall()[0][0]:
        return []
    found = re.findall(r"^-- name: (\w+)\s*$\n(.*?);", sql_file("verdicts.sql"), flags=re.M | re.S)
    queries = {name: re.sub(r"^--.*\n", "", body, flags=re.M).strip() for name, body in found}
    if not con.execute(queries["duplicates"]).fetchall()[0][0]:
        return []
    con.execute(queries["quarantine_later"], [now, *verdict_reason_parts()])
    done = [queries["quarantine_later"], queries["delete_later"]]
    con.execute(queries["delete_later"])
    if con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'traffic_minutes'").fetchall()[0][0]:
        for name in ("reset_rollup", "reset_through"):
            con.execute(queries[name])
            done.append(queries[name])
    return done


def _mark_one_verdict(con: duckdb.DuckDBPyConnection, *, fresh: bool) -> list[str]:
    """Add :data:`ONE_VERDICT` to ``feedback`` when it lacks it; return the statements (none for a new table)."""
    if con.execute("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'feedback' AND column_name = ?",
                   [ONE_VERDICT]).fetchall()[0][0]:
        return []
    done = _drop_dependents(con, "feedback") + [f"ALTER TABLE feedback ADD COLUMN {ONE_VERDICT} BOOLEAN"]
    con.execute(done[-1])
    return [] if fresh else done


def _upgrade_v1_traces(con: duckdb.DuckDBPyConnection, have: pa.Schema, want: pa.Schema) -> list[str]:
    """Layout 1 kept each candidate's state inline: move the states into ``instance_snapshots``."""
    cand = have.field("candidates").type.value_type
    if cand.get_field_index("state") < 0:
        return _migrate(con, "traces", have, want)
    sid = "md5(CAST(to_json(s) AS VARCHAR))[:24]"
    before = [
        f"INSERT INTO instance_snapshots BY NAME SELECT DISTINCT ON (snapshot_id) {sid} AS snapshot_id, "
        f"ts AS seen_at, s.* FROM (SELECT ts, unnest(candidates).state AS s FROM traces) "
        f"WHERE s IS NOT NULL AND {sid} NOT IN (SELECT snapshot_id FROM instance_snapshots)",
        "ALTER TABLE traces ADD COLUMN _state_ids VARCHAR[]",
        "UPDATE traces SET _state_ids = list_transform(candidates, lambda c: "
        "CASE WHEN c.state IS NULL THEN NULL ELSE md5(CAST(to_json(c.state) AS VARCHAR))[:24] END)",
        "ALTER TABLE traces ADD COLUMN detail BOOLEAN DEFAULT true",
    ]
    after = [
        "UPDATE traces SET candidates = list_transform(candidates, lambda c, i: "
        "struct_update(c, state_id := _state_ids[i]))",
        "ALTER TABLE traces DROP COLUMN _state_ids",
    ]
    dropped = _drop_dependents(con, "traces")
    for stmt in before:
        con.execute(stmt)
    middle = _migrate(con, "traces", con.sql("SELECT * FROM traces LIMIT 0").to_arrow_table().schema, want)
    for stmt in after:
        con.execute(stmt)
    return dropped + before + middle + after
