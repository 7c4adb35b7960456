"""The trace view's ts: a time an older file stored outside the range reads at a bound, and says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.ui.data import trace_tables as tt
from schemas import DecisionTrace
from schemas.common import EARLIEST_TIME, LATEST_TIME

LAST = LATEST_TIME - timedelta(microseconds=1)  # the store's reading of a time after the range


@pytest.mark.parametrize(("ts", "said"), [
    (EARLIEST_TIME, "1970-01-01T00:00:00+00:00 (out of range: stored at this time or before it)"),
    (LAST, "9999-12-30T23:59:59.999999+00:00 (out of range: stored at this time or after it)"),
    (EARLIEST_TIME + timedelta(microseconds=1), "1970-01-01T00:00:00.000001+00:00"),
    (LAST - timedelta(microseconds=1), "9999-12-30T23:59:59.999998+00:00"),
    (datetime(2026, 11, 1, tzinfo=UTC), "2026-11-01T00:00:00+00:00"),
])
def test_ts_text_marks_only_the_bounds(ts: datetime, said: str) -> None:
    assert tt.ts_text(ts) == said


def test_the_summary_marks_a_ts_read_at_a_bound(trace: DecisionTrace) -> None:
    assert tt.summary(trace.model_copy(update={"ts": EARLIEST_TIME}))["ts"].endswith("or before it)")
    assert tt.summary(trace.model_copy(update={"ts": LAST}))["ts"].endswith("or after it)")
