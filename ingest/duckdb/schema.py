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
The column-by-column migration is :mod:`ingest.duckdb.migrate`, the older layouts' upgrades
:mod:`ingest.duckdb.upgrades`.

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

from ingest.codec.to_arrow import parse_schema
from ingest.duckdb.derived import DERIVED, add_derived_columns
from ingest.duckdb.migrate import _current, _drop_dependents, _migrate, _quote, _unknown, duckdb_type
from ingest.duckdb.upgrades import RETYPED, _bridge_retyped, _unique_indexes, _upgrade_v1_traces
from ingest.kinds import KINDS
from ingest.record_sink import verdict_reason_parts
from schemas.version import SCHEMA_VERSION

__all__ = ["ONE_VERDICT", "RETYPED", "STORAGE_VERSION", "NewerFile", "duckdb_type", "ensure_schema", "sql_file",
           "transaction"]

log = logging.getLogger(__name__)
STORAGE_VERSION = 2  # 1: traces with inline candidate states and no `detail` column
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


class NewerFile(Exception):
    """The file holds fields this version does not know: a newer RouteLens wrote it (never migrated back)."""

    def __init__(self, table: str, fields: list[str]) -> None:
        shown = ", ".join(fields[:8]) + (f" and {len(fields) - 8} more" if len(fields) > 8 else "")
        super().__init__(f"written by a newer RouteLens: its {table} hold {shown}, which this version does not "
                         "know; migrating it would drop them. Run the newer version, or read a copy with it")


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

