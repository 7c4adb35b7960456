"""The per-minute rollup against answers worked out in Python, whatever order records arrive in.

Sealed minutes answer from ``traffic_minutes``, the rest from the traces; counts must be exact
and quantiles within half a latency bin, through every path: traces sealed by the clock, traces
stored late, feedback before its trace, feedback on a sealed trace, a batch replayed twice.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from bench.synthetic import TraceFactory
from ingest.duckdb import rollup
from ingest.duckdb.store import DuckDBTraceStore
from schemas import DecisionTrace, Feedback
from schemas.queries import AggregateQuery, TraceFilter
from tests.quantile import quantile

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _traces(n: int, seed: int = 5) -> list[DecisionTrace]:
    f = TraceFactory(seed=seed, n_candidates=3, start=T0, step=timedelta(seconds=37))
    return [f.trace(experiment_arm=("a" if i % 3 else "b")) for i in range(n)]


def _feedback(traces: list[DecisionTrace], seed: int = 2) -> list[Feedback]:
    rng = random.Random(seed)
    return [Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=5), correct=rng.random() > 0.4)
            for t in traces if rng.random() < 0.3]


def _expected(traces: list[DecisionTrace], feedback: list[Feedback], flt: TraceFilter,
              width: timedelta) -> dict[datetime, tuple[int, int, int, int, int, list[float]]]:
    assert flt.start is not None and flt.end is not None
    keep = [t for t in traces if flt.start <= t.ts < flt.end
            and (flt.experiment_arm is None or t.experiment_arm == flt.experiment_arm)]
    on: dict[str, list[Feedback]] = {}
    for fb in feedback:
        on.setdefault(fb.request_id, []).append(fb)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    out: dict[datetime, list[DecisionTrace]] = {}
    for t in keep:
        out.setdefault(epoch + (t.ts - epoch) // width * width, []).append(t)
    result = {}
    for start, ts in out.items():
        fbs = [fb for t in ts for fb in on.get(t.request_id, [])]
        lat = [t.outcome.total_ms for t in ts]
        result[start] = (len(ts), sum(t.outcome.status == "error" for t in ts), sum(t.fallback_triggered for t in ts),
                         len(fbs), sum(not fb.correct for fb in fbs), [quantile(lat, q) for q in (0.5, 0.95, 0.99)])
    return result


def _check(store: DuckDBTraceStore, traces: list[DecisionTrace], feedback: list[Feedback], flt: TraceFilter,
           bucket: str = "15m") -> None:
    width = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1)}[bucket]
    got = store.aggregate(AggregateQuery(filter=flt, bucket=bucket))  # type: ignore[arg-type]
    want = _expected(traces, feedback, flt, width)
    assert [b.start for b in got] == sorted(want)
    for b in got:
        n, errors, fallbacks, fb, bad, q = want[b.start]
        assert (b.requests, b.errors, b.fallbacks, b.feedback, b.misroutes) == (n, errors, fallbacks, fb, bad)
        assert [b.latency_p50_ms, b.latency_p95_ms, b.latency_p99_ms] == pytest.approx(q, rel=rollup.BINS.ratio ** 0.5
                                                                                          - 1)
    assert flt.start is not None and flt.end is not None
    edges = Counter((t.rule, t.selected_model, t.selected_instance) for t in traces if flt.start <= t.ts < flt.end
                    and (flt.experiment_arm is None or t.experiment_arm == flt.experiment_arm))
    assert {(e.rule, e.model, e.instance): e.requests for e in store.traffic(flt)} == dict(edges)


def _rolled(path: Path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return int(con.execute("SELECT coalesce(sum(requests), 0) FROM traffic_minutes").fetchall()[0][0])
    finally:
        con.close()


def test_every_arrival_order_is_counted_once(tmp_path: Path) -> None:
    traces = _traces(600)  # about 6 h from T0
    feedback = _feedback(traces)
    early, late = traces[:400], traces[400:]
    clock = Clock(T0 + timedelta(hours=3))  # the first 400 are partly sealed when stored
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=clock)
    store.write_records(feedback[:20])  # feedback before its trace
    store.write_records(early)
    clock.now = T0 + timedelta(hours=7)  # everything so far seals at the next write
    store.write_records(feedback[20:60])  # feedback on sealed traces: delta rows
    store.write_records(late)  # late: before rollup_through, rolled up with the batch
    store.write_records(late[:50] + feedback[40:80])  # a replay: duplicates stored once, counted once
    store.write_records(feedback[80:])
    assert rollup.through(store._rows) == T0 + timedelta(hours=6, minutes=58)
    deltas = store._rows("SELECT count(*) AS n FROM traffic_minutes WHERE requests = 0", [])[0]["n"]
    assert deltas > 0  # feedback on sealed traces went in as delta rows
    flt = TraceFilter(start=T0 - timedelta(minutes=3, seconds=20), end=T0 + timedelta(hours=6, seconds=7))
    _check(store, traces, feedback, flt)
    _check(store, traces, feedback, flt.model_copy(update={"experiment_arm": "b"}), "1h")
    store.close()
    assert _rolled(tmp_path / "t.duckdb") == len(traces)


def test_the_unsealed_tail_and_the_partial_minutes_come_from_the_traces(tmp_path: Path) -> None:
    traces = _traces(300)
    clock = Clock(T0 + timedelta(hours=1, minutes=30))
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=clock)
    store.write_records(traces)
    store.write_records(traces[:1])  # a second write: seals the minutes closed by the clock
    sealed = rollup.through(store._rows)
    assert sealed == T0 + timedelta(hours=1, minutes=28)
    flt = TraceFilter(start=T0 + timedelta(seconds=29), end=T0 + timedelta(hours=3))
    assert rollup.split(flt, sealed)[0] == (T0 + timedelta(minutes=1), sealed)
    _check(store, traces, [], flt)
    store.close()


def test_a_filter_the_rollup_cannot_answer_reads_the_traces_exactly(tmp_path: Path) -> None:
    traces = _traces(200)
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=Clock(T0 + timedelta(days=1)))
    store.write_records(traces)
    flt = TraceFilter(start=T0, end=T0 + timedelta(hours=3), min_latency_ms=0.0)
    assert not rollup.answerable(flt)
    (b, *_) = store.aggregate(AggregateQuery(filter=flt, bucket="1h"))
    lat = [t.outcome.total_ms for t in traces if T0 <= t.ts < T0 + timedelta(hours=1)]
    assert b.latency_p50_ms == pytest.approx(quantile(lat, 0.5))
    store.close()


def test_a_trace_id_filter_reads_the_traces_once_minutes_are_sealed(tmp_path: Path) -> None:
    """The rollup holds no W3C trace id: with minutes sealed it answered 60 requests for a filter that selects 15."""
    tid = "0af7651916cd43dd8448eb211c80319c"
    traces = [t.model_copy(update={"otel_trace_id": tid}) if i % 4 == 0 else t for i, t in enumerate(_traces(60))]
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=Clock(T0 + timedelta(days=1)))  # every minute sealed
    store.write_records(traces)
    flt = TraceFilter(start=T0, end=T0 + timedelta(hours=3), otel_trace_id=tid)
    assert sum(b.requests for b in store.aggregate(AggregateQuery(filter=flt, bucket="1h"))) == 15
    assert sum(e.requests for e in store.traffic(flt)) == 15
    store.close()


@pytest.mark.parametrize("field", sorted(set(TraceFilter.model_fields) - {"start", "end", "router_version",
                                                                          "experiment_arm", "rule", "model",
                                                                          "instance"}))
def test_the_rollup_answers_only_the_window_and_its_dimensions(field: str) -> None:
    sample = {"fallback": True, "outcome": "ok", "otel_trace_id": "0af7651916cd43dd8448eb211c80319c",
              "min_latency_ms": 1.0, "max_latency_ms": 1.0, "violation": "kv-cache", "unset": ["model"]}.get(field, "x")
    window = {"start": T0, "end": T0 + timedelta(hours=1)}
    assert rollup.answerable(TraceFilter(**window, rule="r"))
    assert not rollup.answerable(TraceFilter.model_validate({**window, field: sample}))


def test_an_old_file_is_backfilled_on_open_and_retention_drops_old_minutes(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    traces = _traces(300)
    store = DuckDBTraceStore(path, clock=Clock(T0))  # nothing sealed: every trace is in the future
    store.write_records(traces)
    store.close()
    con = duckdb.connect(str(path))
    con.execute("DROP TABLE traffic_minutes")
    con.execute("DELETE FROM routelens_meta WHERE key = 'rollup_through'")
    con.close()
    store = DuckDBTraceStore(path, clock=Clock(T0 + timedelta(days=2)), retention_days=1)
    store.close()
    assert _rolled(path) == len(traces)
    store = DuckDBTraceStore(path, clock=Clock(T0 + timedelta(days=1, hours=2)), retention_days=1)
    store.apply_retention()
    kept = [t for t in traces if t.ts >= T0 + timedelta(hours=2)]
    _check(store, kept, [], TraceFilter(start=T0, end=T0 + timedelta(hours=8)))
    store.close()


def test_a_binned_quantile_follows_quantile_cont_within_half_a_bin() -> None:
    rng = random.Random(4)
    values = [rng.lognormvariate(6, 1) for _ in range(501)]
    counts = Counter(int(b) for b in rollup.BINS.index(values))
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        got = rollup.quantile(dict(counts), q, min(values), max(values))
        assert got == pytest.approx(quantile(values, q), rel=rollup.BINS.ratio ** 0.5 - 1)
    assert rollup.quantile({7: 1}, 0.99, 3.0, 3.0) == 3.0  # clamped to what was seen
    assert rollup.quantile({}, 0.5, 0.0, 0.0) is None
