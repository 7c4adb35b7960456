"""The derived columns: filled at write time, computed at query time where missing, backfilled on migration."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from ingest.duckdb.derived import DERIVED, HITS_COLUMN
from ingest.duckdb.rollup import BINS
from ingest.duckdb.store import DuckDBTraceStore
from schemas.queries import AggregateQuery, BucketStats, TraceFilter
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


def same_buckets(got: list[BucketStats], want: list[BucketStats]) -> None:
    """Equal counts; quantiles within half a rollup bin (one side may read the rollup, the other the traces)."""
    def counts(bs: list[BucketStats]) -> list[tuple[object, ...]]:
        return [(b.start, b.requests, b.errors, b.fallbacks, round(b.cost, 9), b.feedback, b.misroutes) for b in bs]

    assert counts(got) == counts(want)
    for g, w in zip(got, want, strict=True):
        assert [g.latency_p50_ms, g.latency_p95_ms, g.latency_p99_ms] == pytest.approx(
            [w.latency_p50_ms, w.latency_p95_ms, w.latency_p99_ms], rel=2 * (BINS.ratio ** 0.5 - 1))


def test_tables_without_the_columns_are_backfilled_or_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    _stored(path)
    buckets = _buckets(path)
    assert sum(b.misroutes for b in buckets) == sum(not f.correct for f in DATA.feedback) > 0  # type: ignore[attr-defined]
    con = duckdb.connect(str(path))
    con.execute("DROP INDEX traces_request_id_key")
    con.execute("DROP INDEX feedback_id_key")
    con.execute("DROP INDEX feedback_request_id_key")
    for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        con.execute(f'DROP VIEW "{view}"')
    for table, columns in DERIVED.items():
        for column, _, _ in columns:
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN {column}')
    con.execute("DROP TABLE traffic_minutes")  # nor the rollup (ingest.duckdb.rollup): buckets read the traces
    con.execute("DELETE FROM routelens_meta WHERE key = 'rollup_through'")
    con.close()
    assert _stats(path, read_only=True) == expected_constraints(DATA.traces)  # no columns: computed
    same_buckets(_buckets(path, read_only=True), buckets)
    assert _stats(path) == expected_constraints(DATA.traces)  # migrated: added and backfilled
    same_buckets(_buckets(path), buckets)
    con = duckdb.connect(str(path), read_only=True)
    missing = f"SELECT count(*) FROM traces WHERE {HITS_COLUMN} IS NULL OR rid_hash IS NULL"
    assert con.execute(missing).fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM feedback WHERE rid_hash <> hash(request_id)").fetchall() == [(0,)]
    con.close()
