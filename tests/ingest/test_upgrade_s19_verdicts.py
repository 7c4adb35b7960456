"""An upgrade audit (session 19): a data folder written before one verdict per request, opened by today's store.

Found by running this morning's RouteLens (80ce51e) on a folder, then today's on the same folder:

- The migration moved each request's later verdicts to the quarantine with a ``raw`` the model does
  not read: DuckDB's own text of the time (``"ts":"2026-12-07 08:57:25.640699+00"``), where the
  sink's quarantined verdict holds ISO 8601 (``...T08:57:25.640699Z``). A quarantined verdict an
  operator wants back could not be read as the verdict it was.
- Started again on the upgraded file (a rollback), the older version opened it as its own: a later
  verdict it took hit ``feedback_request_id_key`` and was dropped, neither stored nor quarantined,
  while its rollup counted it (802 verdicts in the rollup, 801 stored, for good). Today's store marks
  the file with a ``feedback`` column no model holds, which an older version's check of the columns
  (``written by a newer RouteLens``) refuses read-write; read-only opens are unaffected.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb

from ingest.codec.to_arrow import parse_schema
from ingest.duckdb.derived import DERIVED
from ingest.duckdb.schema import ONE_VERDICT
from ingest.duckdb.store import DuckDBTraceStore
from ingest.kinds import Kind
from schemas import DecisionTrace, Feedback
from tests.ingest.test_numbers2_verdicts import T0, Clock, _older_file, _same_everywhere, _traces, _verdict


def _older(path: Path, traces: list[DecisionTrace], clock: Clock) -> None:
    """A file as the version before the rule left it (:func:`_older_file`, and without today's mark)."""
    _older_file(path, traces, clock)
    con = duckdb.connect(str(path))
    try:
        for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
            con.execute(f'DROP VIEW "{view}"')
        for (index,) in con.execute("SELECT index_name FROM duckdb_indexes() WHERE table_name = 'feedback'").fetchall():
            con.execute(f'DROP INDEX "{index}"')
        con.execute(f"ALTER TABLE feedback DROP COLUMN IF EXISTS {ONE_VERDICT}")
        con.execute("CREATE UNIQUE INDEX feedback_id_key ON feedback (feedback_id)")
    finally:
        con.close()


def test_a_verdict_the_migration_quarantines_reads_back_as_the_verdict_it_was(tmp_path: Path) -> None:
    path, traces, clock = tmp_path / "t.duckdb", _traces(), Clock(T0 + timedelta(minutes=30))
    _older(path, traces, clock)  # the later verdict of traces[i]: _verdict(t, 8 + i, False)
    store = DuckDBTraceStore(path, clock=clock)
    try:
        held = {q.request_id: q for q in store.quarantined(T0, T0 + timedelta(days=1)) if q.source == "migration"}
        assert len(held) == 6
        for i, t in enumerate(traces[:6]):
            raw = held[t.request_id].raw
            assert raw is not None
            assert Feedback.model_validate_json(raw) == _verdict(t, 8 + i, False), raw
    finally:
        store.close()


def _unknown_to_an_older_version(path: Path) -> list[str]:
    """The ``feedback`` columns a version from before the rule does not know.

    Its check before migrating (``ingest.duckdb.schema`` at 80ce51e): every column must be a field
    of the models (the same feedback fields as today's) or a derived column; any other one is a
    file written by a newer RouteLens, which it refuses read-write.
    """
    con = duckdb.connect(str(path), read_only=True)
    try:
        have = [r[0] for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'feedback'").fetchall()]
    finally:
        con.close()
    known = set(parse_schema(Kind.FEEDBACK).names) | {column for column, _, _ in DERIVED["feedback"]}
    return [c for c in have if c not in known]


def test_a_file_today_s_store_opened_is_refused_by_an_older_version_and_reopens_today(tmp_path: Path) -> None:
    path, traces, clock = tmp_path / "t.duckdb", _traces(), Clock(T0 + timedelta(minutes=30))
    _older(path, traces, clock)
    assert _unknown_to_an_older_version(path) == []  # the older version's own file: it opens it
    DuckDBTraceStore(path, clock=clock).close()  # the upgrade
    assert _unknown_to_an_older_version(path) != []  # it refuses it now, naming the column
    fresh = tmp_path / "new.duckdb"
    DuckDBTraceStore(fresh, clock=clock).close()
    assert _unknown_to_an_older_version(fresh) != []
    for read_only in (True, False):  # today's opens the marked file as before, read-only or not
        store = DuckDBTraceStore(path, clock=clock, read_only=read_only)
        try:
            _same_everywhere(store, 7, 1)
            assert len(store.quarantined(T0, T0 + timedelta(days=1))) == 6
            if not read_only:
                assert store.write_records([_verdict(traces[20], 5, True)]).rejected == []
                assert len(store.write_records([_verdict(traces[20], 9, False)]).rejected) == 1  # still refused
        finally:
            store.close()
    con = duckdb.connect(str(path), read_only=True)
    try:  # the mark was one migration statement, run once, and a new file's was none
        marked = con.execute("SELECT count(*) FROM routelens_migrations WHERE statement LIKE "
                             "'ALTER TABLE feedback ADD COLUMN one_verdict_per_request%'").fetchall()
    finally:
        con.close()
    assert marked == [(1,)]
    con = duckdb.connect(str(fresh), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM routelens_migrations").fetchall() == [(0,)]
    finally:
        con.close()
