"""The Constraints page's numbers against what was stored and what the gateway holds (audit of a real run).

A real run (four instances, a crash, kv pressure, an error burst) showed: the sidebar's model narrowed
the binding counts but not the latches now nor the out-intervals; an empty section under a filter said
"send traffic"; a file store with ``ROUTELENS_LIVE_URL`` had no live latches (the Fleet page had them);
a crashed instance's latch read out from its last scrape, with zero-length intervals beside it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.reader import DB_ENV
from app.ui.data import constraints as cd
from app.ui.data.fleet import LIVE_ENV
from app.ui.limits import CONFIG_ENV, load_limits
from ingest import DuckDBTraceStore
from schemas.fleet import InstanceSnapshot, LatchState
from tests.app import stub_trace_api as stub
from tests.app.ui import routing_seed as seed
from tests.app.ui.pages import assert_clean, open_app_page

PAGE = "views/constraints.py"
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")
CONFIG = """
fleet: {instances: [{id: c-a, model: m, url: "http://127.0.0.1:9"}]}
constraints:
  - {name: kv-cache, metric: kv_cache_usage, op: "<=", threshold: 0.85, enter_below: 0.80}
  - {name: error-rate, metric: error_rate, op: "<=", threshold: 0.15}
"""


@pytest.fixture(autouse=True)
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "routelens.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv(CONFIG_ENV, str(path))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return seed.seeded_file(tmp_path / "traces.duckdb")


@pytest.fixture
def served(db: Path) -> Iterator[stub.StubTraceApi]:
    store = DuckDBTraceStore(db, read_only=True)
    try:
        with stub.StubTraceApi([], store=store, router_state=seed.router_state()) as api:
            yield api
    finally:
        store.close()


def open_page(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], **params: str) -> AppTest:
    return open_app_page(PAGE, monkeypatch, env, **{"end": seed.AT_PARAM, **params})


def figures(at: AppTest) -> dict[str, dict[str, Any]]:
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"]["title"]["text"]] = spec
    return out


def test_the_model_narrows_the_latches_now_and_the_intervals_too(
        monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, {"ROUTELENS_API_URL": served.url}, model="llama")

    assert_clean(at)
    figs = figures(at)
    # The gateway holds l-hot (llama) and c-a, c-hot (coder): only llama's latches are now.
    assert figs["Latches now"]["data"][0]["y"] == ["l-hot (stale)"]
    assert "1 of 1 latch out on 1 of 1 instance." in [c.value for c in at.caption]
    rows = {y for t in figs["Out-intervals per instance and constraint"]["data"] for y in t["y"]}
    assert rows == {"l-hot · error-rate"}  # c-hot's kv-cache intervals are coder's
    bars = figs["How often each constraint bound"]["data"]
    assert bars[0]["y"] == ["error-rate"]  # as the binding counts already were

    at.text_input(key="sb_model").set_value("coder").run()
    figs = figures(at)
    assert figs["Latches now"]["data"][0]["y"] == ["c-a", "c-hot"]
    assert {y for t in figs["Out-intervals per instance and constraint"]["data"] for y in t["y"]} == {
        "c-hot · kv-cache"}


def test_an_empty_section_under_a_filter_names_the_filter(
        monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, {"ROUTELENS_API_URL": served.url}, instance="zzz")

    assert_clean(at)
    infos = [i.value for i in at.info]
    assert len(infos) == 3 and all("instance `zzz`" in i for i in infos), infos
    assert not any("routelens demo" in i or "no latches yet" in i for i in infos), infos
    assert "it reports 4 latches in all" in infos[0]


def test_a_file_store_takes_live_latches_from_the_live_gateway(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    with stub.StubTraceApi([], router_state=seed.router_state()) as live:
        at = open_page(monkeypatch, {DB_ENV: str(db), LIVE_ENV: live.url})
        assert any(p.startswith("/v1/router/state") for p in live.requests)

    assert_clean(at)
    assert figures(at)["Latches now"]["data"][0]["y"] == ["c-a", "c-hot", "l-hot (stale)"]
    assert not any("needs a server" in i.value for i in at.info)


def test_the_latch_table_reads_since_in_utc(monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, {"ROUTELENS_API_URL": served.url})

    table = at.dataframe[0].value.set_index(["instance", "constraint"])
    since = seed.ago(10).strftime("%Y-%m-%d %H:%M:%S")
    assert table.loc[("c-hot", "kv-cache"), "since (UTC)"] == since
    assert table["since (UTC)"].map(type).eq(str).all()  # one type: nothing left for Streamlit to convert


T0 = datetime(2026, 12, 7, 8, 11, 45, 308397, tzinfo=UTC)  # the crashed instance's last scrape


def crashed(age: float, kv: tuple[bool, float | None], err: tuple[bool, float | None]) -> InstanceSnapshot:
    """A snapshot of an instance whose scrapes fail: its last scrape's time, its age growing, latches moving."""
    def latch(name: str, out: bool, since: float | None, value: float) -> LatchState:
        return LatchState(constraint=name, out=out, value=value, since=None if since is None else
                          T0 + timedelta(seconds=since))

    return InstanceSnapshot(instance="coder-6b-a", model="coder", scraped_at=T0, age_s=age, stale=age > 3,
                            latches=[latch("kv-cache", kv[0], kv[1], 1.0), latch("error-rate", err[0], err[1], 0.3)])


def test_intervals_of_a_crashed_instance_start_when_the_latch_went_out() -> None:
    # As stored in the audited run: every snapshot at the last scrape's time, the latches going out 8 and 9 s
    # later and back 21 and 22 s later; the store gives them in no particular order (they tie on every time).
    snaps = [crashed(a, (8 <= a < 21, 8.0 if 8 <= a < 21 else 21.0 if a >= 21 else None),
                     (9 <= a < 22, 9.0 if 9 <= a < 22 else 22.0 if a >= 22 else None)) for a in range(0, 25)]
    random.Random(3).shuffle(snaps)

    got = cd.latch_intervals(snaps, T0 - timedelta(minutes=15), T0 + timedelta(minutes=1))

    assert got[["constraint", "start", "end"]].values.tolist() == [
        ["error-rate", T0 + timedelta(seconds=9), T0 + timedelta(seconds=22)],
        ["kv-cache", T0 + timedelta(seconds=8), T0 + timedelta(seconds=21)],
    ]
    assert got["duration_s"].tolist() == [13.0, 13.0] and got["peak"].tolist() == [0.3, 1.0]


def test_an_interval_ending_on_another_day_dates_its_end() -> None:
    start = datetime(2026, 12, 6, 23, 50, tzinfo=UTC)
    frame = cd.intervals_frame([
        {"instance": "a", "constraint": "kv-cache", "start": start, "end": start + timedelta(minutes=20), "peak": 0.9},
        {"instance": "b", "constraint": "kv-cache", "start": start, "end": start + timedelta(minutes=5), "peak": 0.9},
    ], start - timedelta(days=7), start + timedelta(hours=1))

    table = cd.interval_table(frame, load_limits({}))

    assert table["start"].tolist() == ["2026-12-06 23:50:00"] * 2
    assert table["end"].tolist() == ["2026-12-07 00:10:00", "23:55:00"]  # not "00:10:00": before its start
    assert not table.isna().any().any() and isinstance(table, pd.DataFrame)
