"""The "Constraints" page, run by AppTest over a seeded DuckDB store and the stub's ``/v1/router/state``."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.reader import DB_ENV
from app.ui.limits import CONFIG_ENV
from ingest import DuckDBTraceStore
from tests.app import stub_trace_api as stub
from tests.app.ui import routing_seed as seed
from tests.app.ui.pages import assert_clean, open_app_page

PAGE = "views/constraints.py"
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


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


# The thresholds the values read against: the router's constraints (the page takes them from this file).
CONFIG = """
fleet: {instances: [{id: c-a, model: m, url: "http://127.0.0.1:9"}]}
constraints:
  - {name: kv-cache, metric: kv_cache_usage, op: "<=", threshold: 0.85, enter_below: 0.80}
  - {name: error-rate, metric: error_rate, op: "<=", threshold: 0.15}
"""


@pytest.fixture(autouse=True)
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "routelens.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    return path


def open_page(monkeypatch: pytest.MonkeyPatch, *, db: Path | None = None, api: str | None = None,
              **params: str) -> AppTest:
    env = ({DB_ENV: str(db)} if db is not None else {}) | ({"ROUTELENS_API_URL": api} if api is not None else {})
    return open_app_page(PAGE, monkeypatch, env, **{"end": seed.AT_PARAM, **params})


def figures(at: AppTest) -> dict[str, dict[str, Any]]:
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"]["title"]["text"]] = spec
    return out


def test_state_timeline_and_binding_counts(monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, api=served.url)

    assert not at.error and not at.warning
    assert_clean(at)
    assert [s.value for s in at.subheader] == ["Now", "Out-intervals · last 1h", "Binding counts"]
    figs = figures(at)
    heat = figs["Latches now"]["data"][0]
    assert heat["y"] == ["c-a", "c-hot", "l-hot (stale)"] and heat["x"] == ["error-rate", "kv-cache"]
    # Every value against its threshold, in the metric's unit (issue 33: "in 0.0122" read as nothing).
    assert heat["text"] == [["n/a", "in 30% / 85%"], ["in 0% / 15%", "out 96% / 85%"], ["out 20% / 15%", "n/a"]]
    assert "2 of 4 latches out on 2 of 3 instances." in [c.value for c in at.caption]
    latches = at.dataframe[0].value
    assert "value" not in latches and "None" not in latches.astype(str).to_string()

    closed, still = figs["Out-intervals per instance and constraint"]["data"]
    assert closed["y"] == ["c-hot · kv-cache"] and closed["x"] == [20 * 60_000]  # out 50 → 30 min ago
    assert sorted(still["y"]) == ["c-hot · kv-cache", "l-hot · error-rate"]  # open at the end
    intervals = at.dataframe[1].value
    assert intervals["end"].tolist()[1:] == ["still out", "still out"] and intervals["end"].iloc[0] != "still out"
    assert intervals["duration"].iloc[0] == "1,200 s" and intervals["peak"].str.contains(" / ").all()

    bars = figs["How often each constraint bound"]["data"]
    assert [b["y"] for b in bars][0] == ["kv-cache", "error-rate"]
    assert [b["x"] for b in bars] == [[0, 2], [0, 0], [4, 0], [0, 0]]  # decisive, not decisive, undecided, soft
    assert any("4 undecided" in c.value for c in at.caption)
    counts = at.dataframe[2].value.set_index("constraint")
    link = "/decisions?" + urllib.parse.urlencode({"end": seed.AT_PARAM, "violation": "kv-cache"})
    assert counts.loc["kv-cache", "decisions"] == link  # the decisions in which a candidate broke it
    assert any(p.startswith("/v1/router/state") for p in served.requests)


def test_a_sidebar_filter_changes_the_numbers(monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, api=served.url)
    at.text_input(key="sb_model").set_value("llama").run()
    assert not at.exception
    bars = figures(at)["How often each constraint bound"]["data"]
    assert bars[0]["y"] == ["error-rate"] and bars[0]["x"] == [2]

    at.text_input(key="sb_model").set_value("").run()
    at.text_input(key="sb_instance").set_value("c-hot").run()
    figs = figures(at)
    assert figs["Latches now"]["data"][0]["y"] == ["c-hot"]
    rows = {y for t in figs["Out-intervals per instance and constraint"]["data"] for y in t["y"]}
    assert rows == {"c-hot · kv-cache"}
    # c-hot was never selected: its removals count all the same (the instance is the removed one).
    bars = figs["How often each constraint bound"]["data"]
    assert bars[0]["y"] == ["kv-cache"] and bars[2]["x"] == [4]


def test_deep_link_restores_window_and_instance(monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, api=served.url, window="15m", instance="c-hot")

    assert at.selectbox(key="sb_window").value == "15m" and at.text_input(key="sb_instance").value == "c-hot"
    assert "Out-intervals · last 15m" in [s.value for s in at.subheader]
    (still,) = figures(at)["Out-intervals per instance and constraint"]["data"]
    assert still["name"] == "out (still)" and still["y"] == ["c-hot · kv-cache"]


def test_a_trace_file_has_history_but_no_live_state(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_page(monkeypatch, db=db)

    assert not at.error
    assert any("Live latch state needs a server" in i.value for i in at.info)
    assert set(figures(at)) == {"Out-intervals per instance and constraint", "How often each constraint bound"}


def test_empty_store_and_no_state_endpoint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    store = DuckDBTraceStore(seed.seeded_file(tmp_path / "empty.duckdb", empty=True), read_only=True)
    try:
        with stub.StubTraceApi([], store=store) as api:
            at = open_page(monkeypatch, api=api.url)
    finally:
        store.close()

    assert not at.error and not at.get("plotly_chart")
    assert [w.value for w in at.warning] == [
        f"Live latch state unavailable: GET /v1/router/state: HTTP 404 from the server at {api.url}"]
    assert sum("routelens demo" in i.value for i in at.info) == 2


def test_unreachable_server_is_a_banner(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    at = open_page(monkeypatch, api=closed_port_url)

    assert len(at.error) == 1 and "Trace store unreachable" in at.error[0].value
    assert any("unreachable" in w.value for w in at.warning)
