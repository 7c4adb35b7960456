"""One verdict per request on DuckDB, the leftovers: an older file read read-only, and retention.

A file written before the rule and opened read-only cannot be migrated: it must still count each
request's first verdict (by ``ts``, then ``feedback_id``) in every reader, its rollup (which counted
every verdict) left unread. Retention deletes a verdict with its trace, and traces by the rollup's
whole minutes, so a window reads the same figures from the rollup and from the traces afterwards.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb

from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.kinds import Kind
from schemas import Feedback
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.test_numbers2_verdicts import END, T0, Clock, _older_file, _same_everywhere, _traces


def test_a_read_only_open_of_an_older_file_counts_each_request_s_first_verdict(tmp_path: Path) -> None:
    """It counted every verdict: 13 feedback and 7 misroutes where the store (and its migration) keeps 7 and 1."""
    path, traces, clock = tmp_path / "t.duckdb", _traces(), Clock(T0 + timedelta(minutes=30))
    _older_file(path, traces, clock)
    store = DuckDBTraceStore(path, read_only=True, clock=clock)
    _same_everywhere(store, 7, 1)  # the rollup's sealed minutes counted 13: not read
    assert [m.request_id for m in store.misroutes(TraceFilter(start=T0, end=END))] == [traces[7].request_id]
    assert [f.correct for f in store.feedback(traces[0].request_id)] == [True]
    store.close()
    con = duckdb.connect(str(path), read_only=True)  # nothing was written: the file still holds all 13
    assert con.execute("SELECT count(*) FROM feedback").fetchall() == [(13,)]
    con.close()
    migrated = DuckDBTraceStore(path, clock=clock)  # read-write: migrated, and the same figures
    _same_everywhere(migrated, 7, 1)
    migrated.close()


def test_two_verdicts_at_one_ts_keep_the_lower_feedback_id_as_the_migration_does(tmp_path: Path) -> None:
    path, traces, clock = tmp_path / "t.duckdb", _traces(), Clock(T0 + timedelta(minutes=30))
    store = DuckDBTraceStore(path, clock=clock)
    store.write_records(traces)
    store._connect().execute("DROP INDEX IF EXISTS feedback_request_id_key")
    at = traces[3].ts + timedelta(seconds=7)
    for correct, source in ((True, "a"), (False, "b"), (True, "c")):  # three verdicts, one instant
        store.write_records([Feedback(request_id=traces[3].request_id, ts=at, correct=correct, source=source)])
    store.close()
    con = duckdb.connect(str(path), read_only=True)
    [(first,)] = con.execute("SELECT correct FROM feedback ORDER BY feedback_id LIMIT 1").fetchall()
    con.close()
    read_only = DuckDBTraceStore(path, read_only=True, clock=clock)
    _same_everywhere(read_only, 1, int(not first))
    assert [f.correct for f in read_only.feedback(traces[3].request_id)] == [first]
    read_only.close()
    migrated = DuckDBTraceStore(path, clock=clock)
    assert [f.correct for f in migrated.feedback(traces[3].request_id)] == [first]
    migrated.close()


def test_a_read_only_open_of_today_s_file_reads_its_rollup_and_adds_nothing(tmp_path: Path) -> None:
    path, traces, clock = tmp_path / "t.duckdb", _traces(), Clock(T0 + timedelta(minutes=30))
    store = DuckDBTraceStore(path, clock=clock)
    store.write_records(traces)
    store.write_records([Feedback(request_id=t.request_id, ts=t.ts, correct=False) for t in traces[:3]])
    clock.now = T0 + timedelta(hours=3)
    store.write_records([Feedback(request_id=traces[4].request_id, ts=traces[4].ts, correct=True)])  # sealed now
    store.close()
    read_only = DuckDBTraceStore(path, read_only=True, clock=clock)
    assert read_only._adapt(read_only._connect().cursor(), "SELECT * FROM feedback") == "SELECT * FROM feedback"
    _same_everywhere(read_only, 4, 3)
    read_only.close()


# -- retention -----------------------------------------------------------------------------------------

NOW = T0 + timedelta(days=1, hours=2, seconds=30)  # the cutoff, a day before, falls inside a minute
CUTOFF = NOW - timedelta(days=1)


def _agree(store: DuckDBTraceStore) -> tuple[int, int, int]:
    """(requests, feedback, misroutes) over the hours around the cutoff, the same from the rollup and the traces."""
    flt = TraceFilter(start=T0, end=T0 + timedelta(hours=6))
    figures = set()
    for f in (flt, flt.model_copy(update={"min_latency_ms": 0.0})):  # whole minutes: the rollup; then the traces
        bs = store.aggregate(AggregateQuery(filter=f, bucket="1h"))
        figures.add((sum(b.requests for b in bs), sum(b.feedback for b in bs), sum(b.misroutes for b in bs)))
    assert len(figures) == 1, figures
    return figures.pop()


def test_retention_deletes_a_verdict_with_its_trace_and_traces_by_whole_minutes(tmp_path: Path) -> None:
    """A verdict stamped before its trace left the live reads while the rollup still counted it, and the
    traces of the cutoff's minute left while the rollup kept that minute."""
    f = TraceFactory(seed=9, n_candidates=2, start=CUTOFF - timedelta(minutes=3), step=timedelta(seconds=20))
    traces = [f.trace() for _ in range(18)]  # 3 minutes before the cutoff, 3 after
    clock = Clock(CUTOFF + timedelta(minutes=30))
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=clock, retention_days=1)
    store.write_records(traces)
    in_cut_minute = [t for t in traces if CUTOFF - timedelta(seconds=30) <= t.ts < CUTOFF]
    after = [t for t in traces if t.ts >= CUTOFF]
    before = [t for t in traces if t.ts < CUTOFF - timedelta(seconds=30)]
    assert in_cut_minute and after and before
    early = Feedback(request_id=after[0].request_id, ts=CUTOFF - timedelta(minutes=5), correct=False)  # clock skew
    late = Feedback(request_id=before[0].request_id, ts=CUTOFF + timedelta(minutes=5), correct=False)
    orphan_old = Feedback(request_id="never-traced-1", ts=CUTOFF - timedelta(minutes=1), correct=False)
    orphan_new = Feedback(request_id="never-traced-2", ts=CUTOFF + timedelta(minutes=1), correct=False)
    store.write_records([early, late, orphan_old, orphan_new])
    clock.now = NOW  # every minute sealed, then retention
    store.write_records([Feedback(request_id=after[1].request_id, ts=after[1].ts, correct=True)])
    store.apply_retention()
    kept = len(after) + len(in_cut_minute)
    assert store.count() == kept
    assert _agree(store) == (kept, 2, 1)
    left = {r["request_id"] for r in store._rows("SELECT request_id FROM feedback", [])}
    # the early verdict stays with its trace; the late one went with its trace; orphans by their own ts
    assert left == {after[0].request_id, after[1].request_id, "never-traced-2"}
    assert store.count(Kind.FEEDBACK) == 3
    store.close()

