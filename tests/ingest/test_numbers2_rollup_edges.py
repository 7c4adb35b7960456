"""The Overview's two paths (sealed minutes from the rollup, the rest from the traces) agree at the window's edges.

A window given in a zone whose offset holds seconds (Africa/Monrovia's -0:44:30 until 1972, or any
``+hh:mm:ss`` a client sends) was split on that zone's minutes: the traces of the edge minute fell
between the two reads. Buckets are UTC (epoch-aligned), so a window across a DST change, given in
the zone that changes, with the process in that zone, counts the same through both paths; and late
verdicts (on sealed minutes, before their trace, a second one) count once in both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from schemas.queries import TraceFilter

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def test_a_window_in_a_zone_with_seconds_in_its_offset_loses_no_trace_at_its_edges(tmp_path: Path) -> None:
    traces = list(TraceFactory(seed=2, n_candidates=2, start=T0, step=timedelta(seconds=7)).traces(900))
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=lambda: T0 + timedelta(hours=3))
    store.write_records(traces)
    store.close()
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=lambda: T0 + timedelta(hours=3))  # sealed on open
    monrovia = timezone(-timedelta(minutes=44, seconds=30))
    for start_s, end_s in ((610, 4250), (601, 4229), (655, 4201)):
        start, end = (T0 + timedelta(seconds=start_s)).astimezone(monrovia), (T0 + timedelta(seconds=end_s)).astimezone(
            monrovia)
        truth = sum(start <= t.ts < end for t in traces)
        rolled = store.window_stats(TraceFilter(start=start, end=end))
        scanned = store.window_stats(TraceFilter(start=start, end=end, min_latency_ms=0.0))  # the traces only
        assert rolled is not None and scanned is not None
        assert (rolled.requests, scanned.requests) == (truth, truth), (start_s, end_s)
    store.close()


_DST = r"""
import json, sys
from datetime import datetime, timedelta, UTC
from zoneinfo import ZoneInfo
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from schemas import Feedback
from schemas.queries import AggregateQuery, TraceFilter

ny = ZoneInfo("America/New_York")
t0 = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)  # 00:00 EDT; at 06:00 UTC clocks go back to 01:00 EST
traces = list(TraceFactory(seed=8, n_candidates=2, start=t0, step=timedelta(seconds=41)).traces(600))
early, late = traces[:400], traces[400:]
now = {"t": t0 + timedelta(hours=3)}
store = DuckDBTraceStore(sys.argv[1], clock=lambda: now["t"])
fb = [Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=9), correct=i % 3 == 0)
      for i, t in enumerate(traces) if i % 4 == 0]
store.write_records(fb[:30])                      # verdicts before their traces
store.write_records(early)
now["t"] = t0 + timedelta(hours=8)
store.write_records(fb[30:120])                   # on sealed minutes: delta rows
store.write_records(late)                         # late traces, some with their verdicts stored already
seconds = [Feedback(request_id=f.request_id, ts=f.ts + timedelta(minutes=1), correct=not f.correct) for f in fb]
refused = len(store.write_records(seconds + fb[120:]).rejected)   # a second verdict on each: none counts
start = datetime(2026, 11, 1, 0, 30, 17, tzinfo=ny)  # EDT
end = datetime(2026, 11, 1, 2, 10, 43, tzinfo=ny)    # EST, after the change
out = {"refused": refused}
for bucket in ("15m", "1h", "1d"):
    for name, flt in (("rollup", TraceFilter(start=start, end=end)),
                      ("traces", TraceFilter(start=start, end=end, min_latency_ms=0.0))):
        bs = store.aggregate(AggregateQuery(filter=flt, bucket=bucket))
        out[f"{bucket}/{name}"] = [[b.start.isoformat(), b.requests, b.feedback, b.misroutes] for b in bs]
inside = [t for t in traces if start <= t.ts < end]
ids = {t.request_id for t in inside}
first = [f for f in fb if f.request_id in ids]
out["truth"] = [len(inside), len(first), sum(not f.correct for f in first)]
print(json.dumps(out))
"""


def test_a_window_across_a_dst_change_counts_the_same_through_the_rollup_and_the_traces(tmp_path: Path) -> None:
    env = {**os.environ, "TZ": "America/New_York", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _DST, str(tmp_path / "t.duckdb")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["refused"] == 150  # every second verdict (150 requests hold a first one)
    n, feedback, misroutes = out["truth"]
    assert n > 100 and feedback > 20 and misroutes > 5
    for bucket in ("15m", "1h", "1d"):
        rolled, scanned = out[f"{bucket}/rollup"], out[f"{bucket}/traces"]
        assert rolled == scanned, bucket
        assert [sum(b[i] for b in rolled) for i in (1, 2, 3)] == [n, feedback, misroutes], bucket
        assert all(b[0].endswith("+00:00") for b in rolled)  # UTC buckets, whatever the process's zone
