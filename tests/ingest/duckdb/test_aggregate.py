"""The DuckDB aggregate against answers worked out in Python: misroutes go to the bucket of their
trace (whatever the feedback's own time) and honour every filter; buckets are aligned on the
epoch whatever the window's start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.synthetic import TraceFactory
from ingest.duckdb.rollup import BINS
from ingest.duckdb.store import DuckDBTraceStore
from schemas import DecisionTrace, Feedback
from schemas.queries import BUCKETS, AggregateQuery, TraceFilter
from tests.quantile import quantile

W0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _misroute_store(tmp_path: Path) -> DuckDBTraceStore:
    f = TraceFactory(seed=3, n_candidates=2)
    a = f.trace(ts=W0 + timedelta(minutes=10), experiment_arm="a", router_version="v1", selected_model="m1")
    outside = f.trace(ts=W0 - timedelta(minutes=30), experiment_arm="a", router_version="v1", selected_model="m1")
    c = f.trace(ts=W0 + timedelta(minutes=70), experiment_arm="b", router_version="v2", selected_model="m2")
    d = f.trace(ts=W0 + timedelta(minutes=75), experiment_arm="a", router_version="v1", selected_model="m1")
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.write_records([a, outside, c, d])
    store.write_records([
        # stamped before the window (a client's clock): still a verdict on a trace inside it
        Feedback(request_id=a.request_id, ts=W0 - timedelta(hours=1), correct=False),
        # a second verdict on the same request: quarantined, never counted (one verdict per request)
        Feedback(request_id=a.request_id, ts=W0 + timedelta(minutes=20), correct=True),
        # inside the window, but on a trace before it: not this window's
        Feedback(request_id=outside.request_id, ts=W0 + timedelta(minutes=5), correct=False),
        Feedback(request_id=c.request_id, ts=W0 + timedelta(minutes=71), correct=False),
        Feedback(request_id="req_never_stored", ts=W0 + timedelta(minutes=72), correct=False),
    ])
    return store


@pytest.mark.parametrize(("extra", "expected"), [
    ({}, [(1, 1, 1), (2, 1, 1)]),
    ({"experiment_arm": "a"}, [(1, 1, 1), (1, 0, 0)]),
    ({"router_version": "v2"}, [(1, 1, 1)]),
    ({"model": "m1"}, [(1, 1, 1), (1, 0, 0)]),
    ({"model": "m2", "router_version": "v2", "experiment_arm": "b"}, [(1, 1, 1)]),
    ({"router_version": "v1", "experiment_arm": "b"}, []),
])
def test_misroutes_count_by_the_trace_and_honour_the_filter(tmp_path: Path, extra: dict[str, str],
                                                           expected: list[tuple[int, int, int]]) -> None:
    store = _misroute_store(tmp_path)
    flt = TraceFilter(start=W0, end=W0 + timedelta(hours=2), **extra)
    got = store.aggregate(AggregateQuery(filter=flt, bucket="1h"))
    store.close()
    assert [(b.requests, b.feedback, b.misroutes) for b in got] == expected
    for b in got:
        assert b.misroute_rate == (b.misroutes / b.feedback if b.feedback else None)


@pytest.mark.parametrize("bucket", list(BUCKETS))
def test_buckets_are_aligned_on_the_epoch_whatever_the_start(tmp_path: Path, bucket: str) -> None:
    traces: list[DecisionTrace] = list(TraceFactory(seed=9, n_candidates=2, start=W0 - timedelta(hours=20),
                                                    step=timedelta(minutes=7, seconds=13)).traces(400))
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.write_records(traces)
    start = W0 - timedelta(hours=13, minutes=47, seconds=11, microseconds=123457)
    end = W0 + timedelta(hours=5, seconds=1)
    got = store.aggregate(AggregateQuery(filter=TraceFilter(start=start, end=end), bucket=bucket))
    store.close()
    width = timedelta(seconds=BUCKETS[bucket])
    groups: dict[datetime, list[DecisionTrace]] = {}
    for t in traces:
        if start <= t.ts < end:
            groups.setdefault(EPOCH + (t.ts - EPOCH) // width * width, []).append(t)
    assert [b.start for b in got] == sorted(groups)
    for b in got:
        inside = groups[b.start]
        lat = [t.outcome.total_ms for t in inside]
        assert b.start.utcoffset() == timedelta(0) and b.requests == len(inside)
        assert b.errors == sum(t.outcome.status == "error" for t in inside)
        assert b.cost == pytest.approx(sum(t.outcome.cost or 0 for t in inside))
        # Sealed minutes answer from the rollup's latency bins: within half a bin (1.05%) of the exact quantile.
        assert [b.latency_p50_ms, b.latency_p95_ms, b.latency_p99_ms] == pytest.approx(
            [quantile(lat, p) for p in (0.5, 0.95, 0.99)], rel=BINS.ratio ** 0.5 - 1)
