"""Opening store files left by other versions: a crash's write-ahead log, a newer version's fields.

A store file whose write-ahead log holds a statement with a lambda opens without a network.

Found by an upgrade audit: a data folder left by a crashed older RouteLens was migrated at the next
start (``ALTER ... USING list_transform(...)``, a lambda), the close did not checkpoint a log it had
replayed, and the next open replayed the migration from the log, where DuckDB tried to download
``core_functions`` (linked into the package) instead of loading it: the file could not be opened,
by any version, without a network. Here a process writes such a log and dies without closing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ingest.duckdb.store import OFFLINE, DuckDBTraceStore
from ingest.errors import SinkError

_CRASH = """
import duckdb, os, sys
con = duckdb.connect(sys.argv[1])
con.execute("SET checkpoint_threshold = '1GB'")
con.execute("CREATE TABLE legacy (x INTEGER[])")
con.execute("CHECKPOINT")
con.execute("INSERT INTO legacy VALUES ([1, 2])")
con.execute("ALTER TABLE legacy ALTER COLUMN x TYPE BIGINT[] USING list_transform(x, lambda v: v * 2)")
os._exit(0)  # killed: the log is left as it is
"""


def _crashed(path: Path) -> None:
    subprocess.run([sys.executable, "-c", _CRASH, str(path)], check=True, timeout=60)
    assert Path(f"{path}.wal").stat().st_size > 0


def test_a_log_with_a_lambda_is_replayed_offline_and_the_migration_checkpointed(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    _crashed(path)
    store = DuckDBTraceStore(path)  # replays the log, creates the trace tables (a migration), checkpoints
    assert store.count() == 0
    store.close()
    assert not Path(f"{path}.wal").exists() or Path(f"{path}.wal").stat().st_size == 0
    con = duckdb.connect(str(path), read_only=True, config=dict(OFFLINE))
    assert con.execute("SELECT x FROM legacy").fetchall() == [([2, 4],)]
    con.close()


def test_a_read_only_open_replays_it_offline_too(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    _crashed(path)
    con = duckdb.connect(str(path), read_only=True, config=dict(OFFLINE))
    assert con.execute("SELECT x FROM legacy").fetchall() == [([2, 4],)]
    con.close()


def test_a_file_a_newer_version_wrote_is_refused_not_migrated_back(tmp_path: Path) -> None:
    """Found by the same audit: an older RouteLens 'migrated' a newer one's file back, dropping what it recorded."""
    path = tmp_path / "t.duckdb"
    DuckDBTraceStore(path).close()
    con = duckdb.connect(str(path), config=dict(OFFLINE))
    con.execute("DROP INDEX traces_request_id_key")
    for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        con.execute(f'DROP VIEW "{view}"')
    con.execute("ALTER TABLE traces ADD COLUMN from_the_future INTEGER")  # a field a later version records
    con.close()
    with pytest.raises(SinkError, match="written by a newer RouteLens: its traces hold from_the_future"):
        DuckDBTraceStore(path)
    con = duckdb.connect(str(path), read_only=True, config=dict(OFFLINE))
    assert "from_the_future" in [r[0] for r in con.execute("DESCRIBE traces").fetchall()]  # left as it was
    con.close()
    assert DuckDBTraceStore(path, read_only=True).count() == 0  # a copy can still be read


def test_every_field_of_a_file_this_version_wrote_is_known(tmp_path: Path) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.close()
    DuckDBTraceStore(tmp_path / "t.duckdb").close()  # opened again: nothing refused, nothing migrated
