import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ingest.duckdb_store import DuckDBTraceStore
from ingest.errors import SinkUnavailable
from tests.factories import make_trace


def test_round_trip_through_a_real_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "traces.duckdb"
    store = DuckDBTraceStore(path)
    traces = [make_trace(f"req_{i}") for i in range(3)]
    store.write_batch(traces)
    assert store.count() == 3
    assert store.get("req_1") == traces[1]
    assert store.get("req_unknown") is None
    store.close()

    ro = DuckDBTraceStore(path, read_only=True)
    got = ro.get("req_2")
    assert got == traces[2]
    assert got is not None and got.candidates[0].violations[0].constraint == "kv-cache"
    ro.close()


def test_sql_looking_ids_are_parameters(tmp_path: Path) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.write_batch([make_trace("req_a")])
    assert store.get("req_a' OR '1'='1") is None
    store.write_batch([make_trace("x'); DROP TABLE traces; --")])
    assert store.get("x'); DROP TABLE traces; --") is not None and store.count() == 2
    store.close()


def test_columns_are_derived_from_the_model(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    DuckDBTraceStore(path).close()
    con = duckdb.connect(str(path), read_only=True)
    cols = [r[0] for r in con.execute("DESCRIBE traces").fetchall()]
    version = con.execute("SELECT value FROM routelens_meta WHERE key = 'schema_version'").fetchone()
    con.close()
    assert cols[:3] == ["schema_version", "request_id", "ts"] and "candidates" in cols
    assert version == ("1",)


def test_a_file_another_process_writes_is_unavailable_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    DuckDBTraceStore(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(path)!r}); print('held', flush=True); "
                               "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(SinkUnavailable, match="cannot open"):
            DuckDBTraceStore(path, read_only=True)
    finally:
        holder.communicate("", timeout=30)
    DuckDBTraceStore(path, read_only=True).close()  # free again once the writer is gone


def test_feedback_is_stored_in_its_own_table(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from schemas import Feedback

    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    fb = Feedback(request_id="req_1", ts=datetime(2026, 11, 1, tzinfo=UTC), correct=False, expected_model="big")
    store.write_feedback([fb])
    store.close()
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    rows = con.execute("SELECT request_id, correct, expected_model FROM feedback").fetchall()
    con.close()
    assert rows == [("req_1", False, "big")]
