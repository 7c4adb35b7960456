"""traces.constraint_hits: derived at write time, computed at query time where missing, backfilled on migration."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ingest.duckdb.derived import HITS_COLUMN
from ingest.duckdb.store import DuckDBTraceStore
from schemas.queries import TraceFilter
from tests.ingest.test_trace_store import DATA, expected_constraints


def _stored(path: Path) -> None:
    store = DuckDBTraceStore(path)
    store.write_records(DATA.traces)
    store.close()


def _stats(path: Path, read_only: bool = False) -> list[object]:
    store = DuckDBTraceStore(path, read_only=read_only)
    try:
        return list(store.constraint_stats(TraceFilter()))
    finally:
        store.close()


def test_rows_written_around_the_sink_are_computed_at_query_time(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    _stored(path)
    con = duckdb.connect(str(path))
    con.execute(f"UPDATE traces SET {HITS_COLUMN} = NULL WHERE ts < (SELECT median(ts) FROM traces)")
    nulls = con.execute(f"SELECT count(*) FROM traces WHERE {HITS_COLUMN} IS NULL").fetchall()[0][0]
    con.close()
    assert 0 < nulls < len(DATA.traces)
    assert _stats(path) == expected_constraints(DATA.traces)


def test_a_table_without_the_column_is_backfilled_or_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    _stored(path)
    con = duckdb.connect(str(path))
    con.execute("DROP INDEX traces_request_id_key")
    for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        con.execute(f'DROP VIEW "{view}"')
    con.execute(f"ALTER TABLE traces DROP COLUMN {HITS_COLUMN}")
    con.close()
    assert _stats(path, read_only=True) == expected_constraints(DATA.traces)  # no column: computed
    assert _stats(path) == expected_constraints(DATA.traces)  # migrated: added and backfilled
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute(f"SELECT count(*) FROM traces WHERE {HITS_COLUMN} IS NULL").fetchall() == [(0,)]
    con.close()
