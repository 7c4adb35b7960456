"""Upgrades of older file layouts that the generic migration (:mod:`ingest.duckdb.migrate`) cannot bridge.

A column an older layout held in place of one of today's, of a type the generic conversion cannot
bridge (:data:`RETYPED`), is rewritten into today's by its own expression and then dropped; layout
1's traces kept each candidate's state inline (moved into ``instance_snapshots``) and allowed
duplicate ids (one row per id is kept before the unique index is created).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from ingest.duckdb.migrate import _drop_dependents, _migrate, _quote, duckdb_type
from ingest.kinds import KINDS
from schemas.common import ProbeVerdict

__all__ = ["RETYPED"]


RETYPED: dict[str, dict[str, tuple[str, str]]] = {
    # The first layout (before 2026-12-01) judged a probe run by ``ok`` (boolean), not a verdict:
    # true was a passing run (``ok``), false a failing one (``failed``; ``degraded`` did not exist yet).
    "probe_results": {"verdict": ("ok", f"CASE WHEN \"ok\" THEN '{ProbeVerdict.OK.value}' "
                                        f"WHEN NOT \"ok\" THEN '{ProbeVerdict.FAILED.value}' END")},
}
"""Per table, today's column -> (the older layout's column it replaces, SQL computing today's from it)."""


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
