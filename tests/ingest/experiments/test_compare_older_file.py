"""``compare`` on a DuckDB file from before ``arm_forced``: read-only (no migration) as after migrating it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ingest.duckdb.store import DuckDBTraceStore
from schemas.experiments import CompareQuery
from tests.ingest.experiments.experiment_data import END, T0, experiment

N = 120


def drop_arm_forced(path: Path) -> None:
    """Make the (closed) store file at ``path`` one written before the ``arm_forced`` column."""
    con = duckdb.connect(str(path))
    con.execute("DROP INDEX traces_request_id_key")
    for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        con.execute(f'DROP VIEW "{view}"')  # as a file written before the column
    con.execute("ALTER TABLE traces DROP COLUMN arm_forced")
    con.close()


def test_a_file_from_before_arm_forced_compares_read_only_and_after_migration(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    traces, feedback = experiment(N, N)
    store = DuckDBTraceStore(path)
    store.write_records(traces)
    store.write_records(feedback)
    store.close()
    drop_arm_forced(path)
    query = CompareQuery(a="a", b="b", start=T0, end=END)
    old = DuckDBTraceStore(path, read_only=True)
    report = old.compare(query)
    old.close()
    assert (report.n_a, report.n_b, report.forced_a, report.forced_b) == (N, N, 0, 0)
    assert report.metrics["misroute_rate"].n_a > 0  # the feedback join ran too
    migrated = DuckDBTraceStore(path)  # adds the column (NULL: nothing was forced)
    again = migrated.compare(query)  # DuckDB sums in parallel: the last bits of a p-value may differ
    assert (again.n_a, again.n_b, again.forced_a, again.forced_b) == (N, N, 0, 0)
    for name, metric in again.metrics.items():
        assert (metric.a, metric.b) == (pytest.approx(report.metrics[name].a), pytest.approx(report.metrics[name].b))
    migrated.close()
