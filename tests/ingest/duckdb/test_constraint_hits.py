"""The derived columns: filled at write time, computed at query time where missing, backfilled on migration."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb

from ingest.duckdb.derived import DERIVED, HITS_COLUMN
from ingest.duckdb.store import DuckDBTraceStore
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.test_trace_store import DATA, T0, expected_constraints


def _stored(path: Path) -> None:
    store = DuckDBTraceStore(path)
    store.write_records(DATA.traces)
    store.write_records(DATA.feedback)
    store.close()


def _buckets(path: Path, read_only: bool = False) -> list[object]:
    store = DuckDBTraceStore(path, read_only=read_only)
    try:
        return list(store.aggregate(AggregateQuery(filter=TraceFilter(start=T0, end=T0 + timedelta(hours=2)))))
    finally:
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


def test_tables_without_the_columns_are_backfilled_or_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    _stored(path)
    buckets = _buckets(path)
    assert sum(b.misroutes for b in buckets) == sum(not f.correct for f in DATA.feedback) > 0  # type: ignore[attr-defined]
    con = duckdb.connect(str(path))
    con.execute("DROP INDEX traces_request_id_key")
    con.execute("DROP INDEX feedback_id_key")
    for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        con.execute(f'DROP VIEW "{view}"')
    for table, columns in DERIVED.items():
        for column, _, _ in columns:
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN {column}')
    con.close()
    assert _stats(path, read_only=True) == expected_constraints(DATA.traces)  # no columns: computed
    assert _buckets(path, read_only=True) == buckets
    assert _stats(path) == expected_constraints(DATA.traces)  # migrated: added and backfilled
    assert _buckets(path) == buckets
    con = duckdb.connect(str(path), read_only=True)
    missing = f"SELECT count(*) FROM traces WHERE {HITS_COLUMN} IS NULL OR rid_hash IS NULL"
    assert con.execute(missing).fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM feedback WHERE rid_hash <> hash(request_id)").fetchall() == [(0,)]
    con.close()
