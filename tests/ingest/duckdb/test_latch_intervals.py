"""Latch out-intervals computed by the DuckDB store from its snapshots (``sql/latches.sql``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ingest.duckdb.store import DuckDBTraceStore
from schemas.fleet import InstanceSnapshot, LatchState

T0 = datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
RATE = 6  # snapshots a second: an hour holds 21,600, far more than one page of 1,000
# Six out-intervals in the hour, (start, end) in seconds from T0: every 8 minutes, 20 s to 4 minutes long.
OUT = [(240, 260), (720, 780), (1200, 1230), (1680, 1920), (2400, 2420), (3120, 3300)]


def is_out(s: float) -> bool:
    return any(a <= s < b for a, b in OUT)


def hour_of_snapshots(instance: str = "coder-6b-b", *, with_since: bool = True) -> list[InstanceSnapshot]:
    """One instance, RATE snapshots a second for an hour; its kv-cache latch out during OUT, error-rate never."""
    snaps, since = [], None
    for i in range(3600 * RATE):
        s = i / RATE
        ts = T0 + timedelta(seconds=s)
        out = is_out(s)
        if i and out != is_out((i - 1) / RATE):
            since = ts  # the latch changed at this evaluation
        kv = LatchState(constraint="kv-cache", out=out, since=since if with_since else None,
                        value=0.9 + (s % 10) / 100 if out else 0.5)
        err = LatchState(constraint="error-rate", out=False, value=0.01)
        snaps.append(InstanceSnapshot(instance=instance, model="coder-6b", scraped_at=ts, kv_cache_usage=kv.value,
                                      latches=[kv, err]))
    return snaps


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DuckDBTraceStore:
    path: Path = tmp_path_factory.mktemp("latches") / "t.duckdb"
    st = DuckDBTraceStore(path)
    st.write_records(hour_of_snapshots())
    st.write_records(hour_of_snapshots("coder-6b-a", with_since=False)[: 600 * RATE])  # 10 min, no `since`
    return st


def test_every_interval_of_an_hour_of_snapshots(store: DuckDBTraceStore) -> None:
    got = store.latch_intervals(T0, T0 + timedelta(hours=1), instance="coder-6b-b")

    assert got.snapshots == 3600 * RATE and not got.truncated
    assert [(i.instance, i.model, i.constraint) for i in got.intervals] == [
        ("coder-6b-b", "coder-6b", "kv-cache")] * len(OUT)  # the model: a model filter needs no other source
    # From the first out snapshot to the first in one (`since` is that snapshot's time).
    assert [(i.start, i.end) for i in got.intervals] == [
        (T0 + timedelta(seconds=a), T0 + timedelta(seconds=b)) for a, b in OUT]
    assert all(i.peak is not None and 0.9 <= i.peak < 1.0 for i in got.intervals)


def test_bounds_without_since_and_an_interval_still_open(store: DuckDBTraceStore) -> None:
    got = store.latch_intervals(T0, T0 + timedelta(minutes=10), instance="coder-6b-a")
    assert [(i.start, i.end) for i in got.intervals] == [
        (T0 + timedelta(seconds=240), T0 + timedelta(seconds=260))]

    # A window beginning inside an interval: it starts at its first snapshot there (no `since`), and
    # one ending inside it leaves it open.
    got = store.latch_intervals(T0 + timedelta(seconds=250), T0 + timedelta(seconds=255), instance="coder-6b-a")
    (only,) = got.intervals
    assert only.start == T0 + timedelta(seconds=250) and only.end is None
    # With `since`, the start is when the latch changed, before the window.
    (b,) = store.latch_intervals(T0 + timedelta(seconds=250), T0 + timedelta(seconds=300),
                                 instance="coder-6b-b").intervals
    assert b.start == T0 + timedelta(seconds=240) and b.end == T0 + timedelta(seconds=260)


def test_all_instances_the_limit_and_an_empty_window(store: DuckDBTraceStore) -> None:
    got = store.latch_intervals(T0, T0 + timedelta(hours=1))
    assert [i.instance for i in got.intervals] == ["coder-6b-a"] + ["coder-6b-b"] * len(OUT)

    newest = store.latch_intervals(T0, T0 + timedelta(hours=1), limit=2)
    assert newest.truncated and [i.start for i in newest.intervals] == [
        T0 + timedelta(seconds=a) for a, _ in OUT[-2:]]

    none = store.latch_intervals(T0 - timedelta(hours=1), T0)
    assert none.intervals == [] and none.snapshots == 0 and not none.truncated
