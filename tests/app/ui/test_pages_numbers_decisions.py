"""Decisions and Topology against each other and the stored traces (audit of a real run).

Topology and Constraints pinned to ``?end=`` link each flow and constraint to the decisions behind it
with that ``end``; the Decisions page ignored it and listed a window ending now (none of the flow's
requests once the window had passed). A window of one request read "1 requests", and a window with
traffic but no removal asked for traffic.
"""

from __future__ import annotations

import urllib.parse
from datetime import timedelta
from pathlib import Path

import pytest

from app.reader import DB_ENV
from app.ui.data.topology import edge_table
from app.ui.limits import CONFIG_ENV
from ingest import DuckDBTraceStore
from schemas.queries import TraceFilter
from tests.app.ui import routing_seed as seed
from tests.app.ui.pages import assert_clean, open_app_page
from tests.factories import make_trace

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "none.yaml"))  # the defaults, never the shipped file


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return seed.seeded_file(tmp_path / "traces.duckdb")


def shown_ids(at: object) -> list[str]:
    tables = at.dataframe  # type: ignore[attr-defined]
    return tables[0].value["request_id"].tolist() if tables else []


def test_a_flow_link_lists_the_requests_the_flow_counted(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    store = DuckDBTraceStore(db, read_only=True)
    try:
        window = TraceFilter(start=seed.AT - timedelta(hours=1), end=seed.AT)
        flows = edge_table(store.traffic(window), store.traffic(window.model_copy(update={"fallback": True})),
                           {"window": "1h", "end": seed.AT_PARAM})
    finally:
        store.close()
    flow = flows.set_index(["rule", "model", "instance"]).loc[("code", "coder", "c-a")]
    assert flow["requests"] == 3
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(flow["decisions"]).query))

    at = open_app_page("views/decisions.py", monkeypatch, {DB_ENV: str(db)}, **params)

    assert_clean(at, placeholder_tables=(0,))
    assert shown_ids(at) == ["req-000", "req-001", "req-002"]  # newest first; the window ends at ?end=
    assert any("pinned to end at" in c.value for c in at.caption)
    assert any(c.value.startswith("Page 1: 3 decisions.") for c in at.caption)


def test_the_window_ends_where_the_link_pins_it(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_app_page("views/decisions.py", monkeypatch, {DB_ENV: str(db)}, window="15m",
                       end=(seed.AT - timedelta(minutes=8)).isoformat())

    assert shown_ids(at) == ["req-003", "req-004", "req-005"]  # 9, 20 and 21 min before AT: [AT - 23, AT - 8)


@pytest.fixture
def one(tmp_path: Path) -> Path:
    """One request 5 minutes before AT, no candidate removed."""
    trace = make_trace("req-one", ts=seed.ago(5), selected_model="coder", selected_instance="c-a")
    kept = [c.model_copy(update={"violations": [], "feasible": True}) for c in trace.candidates]
    store = DuckDBTraceStore(tmp_path / "one.duckdb")
    try:
        store.write_records([trace.model_copy(update={"candidates": kept})])
    finally:
        store.close()
    return tmp_path / "one.duckdb"


def test_one_request_reads_as_one(monkeypatch: pytest.MonkeyPatch, one: Path) -> None:
    at = open_app_page("views/topology.py", monkeypatch, {DB_ENV: str(one)}, end=seed.AT_PARAM)

    assert any(c.value.startswith("1 request, 0 with a fallback") for c in at.caption), [c.value for c in at.caption]


def test_traffic_without_removals_does_not_ask_for_traffic(monkeypatch: pytest.MonkeyPatch, one: Path) -> None:
    at = open_app_page("views/constraints.py", monkeypatch, {DB_ENV: str(one)}, end=seed.AT_PARAM)

    infos = [i.value for i in at.info]
    assert "No constraint removed or scaled a candidate in the window." in infos, infos
    assert not any("routelens demo" in i for i in infos), infos
