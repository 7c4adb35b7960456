"""The Constraints page's out-intervals over a busy hour: every interval, whichever way the store is read.

The audit's case: the demo stores hundreds of snapshots a minute per instance, and the page read
only the first page of each 1/24 of the window, so most latch intervals were missing.
"""

from __future__ import annotations

import bisect
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.reader import DB_ENV
from app.ui.charts.constraints import MIN_BAR_SHARE, timeline_chart
from app.ui.data.constraints import intervals_frame, latch_intervals, read_whole
from ingest import DuckDBTraceStore
from schemas.fleet import InstanceSnapshot, LatchState
from tests.app import stub_trace_api as stub
from tests.app.ui.pages import open_app_page

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
END = T0 + timedelta(hours=1)
RATE = 8  # snapshots a second per instance: 1,200 in each 1/24 of the hour, more than one read of 1,000
OUT = [(240, 260), (720, 780), (1200, 1230), (1680, 1920), (2400, 2420), (3120, 3300)]  # s from T0
TIMELINE = "Out-intervals per instance and constraint"


def is_out(s: float) -> bool:
    return any(a <= s < b for a, b in OUT)


def snapshots(instance: str) -> list[InstanceSnapshot]:
    """An hour of ``instance`` at RATE a second, its kv-cache latch out during OUT (``since`` kept)."""
    out, since = [], None
    for i in range(3600 * RATE):
        s, ts = i / RATE, T0 + timedelta(seconds=i / RATE)
        if i and is_out(s) != is_out((i - 1) / RATE):
            since = ts
        latch = LatchState(constraint="kv-cache", out=is_out(s), since=since, value=0.95 if is_out(s) else 0.5)
        out.append(InstanceSnapshot(instance=instance, model="coder-6b", scraped_at=ts, latches=[latch]))
    return out


@pytest.fixture(scope="module")
def busy_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("busy") / "traces.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records(snapshots("coder-6b-a") + snapshots("coder-6b-b"))
    finally:
        store.close()
    return path


def expected() -> list[tuple[datetime, datetime]]:
    return [(T0 + timedelta(seconds=a), T0 + timedelta(seconds=b)) for a, b in OUT]


def timeline(at: AppTest) -> dict[str, Any]:
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if spec["layout"]["title"]["text"] == TIMELINE:
            return spec
    raise AssertionError("no timeline drawn")


def bars_per_row(spec: dict[str, Any]) -> dict[str, int]:
    rows: dict[str, int] = {}
    for trace in spec["data"]:
        if trace["type"] == "bar":
            for y in trace["y"]:
                rows[y] = rows.get(y, 0) + 1
    return rows


def open_page(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], **params: str) -> AppTest:
    at = open_app_page("views/constraints.py", monkeypatch, env, end=END.isoformat(), **params)
    assert not at.error, [e.value for e in at.error]
    return at


def test_a_trace_file_shows_every_interval_of_a_busy_hour(monkeypatch: pytest.MonkeyPatch, busy_db: Path) -> None:
    at = open_page(monkeypatch, {DB_ENV: str(busy_db)})

    assert bars_per_row(timeline(at)) == {"coder-6b-a · kv-cache": 6, "coder-6b-b · kv-cache": 6}
    table = at.dataframe[0].value
    assert table["start"].tolist()[:6] == [f"{a:%Y-%m-%d %H:%M:%S}" for a, _ in expected()]
    assert table["end"].tolist()[:6] == [f"{b:%H:%M:%S}" for _, b in expected()]
    assert not any("may show late" in c.value or "missing" in c.value for c in at.caption)


def test_a_server_without_the_route_is_read_whole(monkeypatch: pytest.MonkeyPatch, busy_db: Path) -> None:
    """The test stub serves ``/v1/snapshots`` but not ``/v1/analytics/latches``: the page pages the snapshots."""
    store = DuckDBTraceStore(busy_db, read_only=True)
    try:
        with stub.StubTraceApi([], store=store) as api:
            at = open_page(monkeypatch, {"ROUTELENS_API_URL": api.url}, instance="coder-6b-b")
            assert any(p.startswith("/v1/analytics/latches") for p in api.requests)
    finally:
        store.close()
    assert bars_per_row(timeline(at)) == {"coder-6b-b · kv-cache": 6}


def test_read_whole_halves_full_spans_and_keeps_to_its_budget() -> None:
    times = [T0 + timedelta(seconds=i / RATE) for i in range(3600 * RATE)]  # 1,200 per 1/24
    reads: list[tuple[datetime, datetime]] = []

    def read(lo: datetime, hi: datetime) -> list[datetime]:
        reads.append((lo, hi))
        return times[bisect.bisect_left(times, lo):bisect.bisect_left(times, hi)][:1000]

    got, cut = read_whole(read, T0, END, parts=24, page=1000, budget=100)
    assert sorted(got) == times and cut == 0 and len(reads) <= 100

    reads.clear()
    got, cut = read_whole(read, T0, END, parts=24, page=1000, budget=30)
    assert len(reads) <= 30 and cut > 0 and len(got) < len(times)


def test_the_store_answer_and_the_snapshots_give_the_same_frame(busy_db: Path) -> None:
    store = DuckDBTraceStore(busy_db, read_only=True)
    try:
        answer = store.latch_intervals(T0, END)
    finally:
        store.close()
    computed = intervals_frame([i.model_dump() for i in answer.intervals], T0, END)
    from_snaps = latch_intervals(snapshots("coder-6b-a") + snapshots("coder-6b-b"), T0, END)
    pd.testing.assert_frame_equal(computed.drop(columns="peak"), from_snaps.drop(columns="peak"), check_dtype=False)


def test_a_twenty_second_interval_shows_at_six_hours() -> None:
    end = T0 + timedelta(hours=6)
    frame = intervals_frame([{"instance": "coder-6b-b", "constraint": "kv-cache", "start": T0 + timedelta(hours=1),
                              "end": T0 + timedelta(hours=1, seconds=20), "peak": 0.9}], T0, end)
    (bar,) = timeline_chart(frame, T0, end).data
    assert bar.x[0] >= 6 * 3600 * 1000 * MIN_BAR_SHARE > 20_000  # several pixels, not a tenth of one
    assert "(20 s)" in bar.hovertemplate.replace("%{customdata[2]}", str(bar.customdata[0][2]))
