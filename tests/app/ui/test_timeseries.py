"""Time-series hygiene: bucket size follows the span, every bucket present, gaps broken, the filling one marked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from app.ui import timeseries as ts

T = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("span", "bucket"), [
    (timedelta(minutes=15), "1m"), (timedelta(hours=1), "1m"), (timedelta(hours=6), "15m"),
    (timedelta(hours=24), "1h"), (timedelta(days=7), "6h"),
])
def test_the_bucket_follows_the_window(span: timedelta, bucket: str) -> None:
    assert ts.bucket_for(span) == bucket


def test_a_short_span_of_data_gets_a_finer_bucket_never_a_coarser_one() -> None:
    assert ts.finer_bucket("1h", timedelta(minutes=40)) == "1m"
    assert ts.finer_bucket("1h", timedelta(hours=10)) == "15m"
    assert ts.finer_bucket("1m", timedelta(days=2)) == "1m"


def test_complete_fills_every_bucket_and_marks_the_partial_ones() -> None:
    frame = pd.DataFrame({"start": [T + timedelta(minutes=1)], "requests": [4], "rate": [0.5], "cost": [2.0]})
    got = ts.complete(frame, T + timedelta(seconds=30), T + timedelta(minutes=3, seconds=15), "1m",
                      counts=("requests",), zeros=("cost",))
    assert got["start"].tolist() == [T + timedelta(minutes=m) for m in range(4)]
    assert got["requests"].tolist() == [0, 4, 0, 0] and got["cost"].tolist() == [0.0, 2.0, 0.0, 0.0]
    assert got["rate"].isna().tolist() == [True, False, True, True]
    assert got["partial"].tolist() == [True, False, False, True]
    assert got["covered"].tolist() == [0.5, 1.0, 1.0, 0.25]
    assert ts.partial_span(got, "1m", T + timedelta(minutes=3, seconds=15)) == (
        T + timedelta(minutes=3), T + timedelta(minutes=4))
    whole = ts.complete(frame, T, T + timedelta(minutes=2), "1m", counts=("requests",))
    assert not whole["partial"].any() and ts.partial_span(whole, "1m", T + timedelta(minutes=2)) is None


def test_gap_breaks_insert_a_hole_only_in_wide_gaps() -> None:
    times = [T + timedelta(seconds=s) for s in (0, 1, 2, 3, 90, 91)]
    frame = pd.DataFrame({"ts": times, "kv": [0.1] * 6})
    got = ts.gap_breaks(frame)
    assert len(got) == 7 and got["kv"].isna().tolist() == [False] * 4 + [True] + [False] * 2
    assert len(ts.gap_breaks(frame.iloc[:4])) == 4  # steady scrapes: nothing inserted
