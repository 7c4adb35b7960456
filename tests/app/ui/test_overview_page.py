"""The Overview page, run by AppTest over a DuckDB store seeded here (and the stub API for live alerts)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.reader import API_ENV, DB_ENV
from app.ui.data.fleet import LIVE_ENV
from app.units import fmt
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from schemas import DecisionTrace, Feedback
from tests.app import stub_trace_api as stub
from tests.app.ui.pages import assert_clean, open_app_page

PAGE = "views/overview.py"
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def seed(path: Path, now: datetime) -> tuple[list[DecisionTrace], list[DecisionTrace]]:
    """40 traces in the last hour (well inside it), 20 in the hour before, two misroutes on recent ones.

    The page's window ends at the wall clock; the traces sit minutes from either edge.
    """
    recent = list(TraceFactory(seed=5, n_candidates=3, start=now - timedelta(minutes=45),
                               step=timedelta(seconds=60)).traces(40))
    earlier = list(TraceFactory(seed=6, n_candidates=3, start=now - timedelta(minutes=110),
                                step=timedelta(seconds=120)).traces(20))
    store = DuckDBTraceStore(path)
    store.write_records([*recent, *earlier])
    store.write_records([Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=5), correct=False,
                                  expected_model="qwen-72b") for t in recent[-2:]])
    store.close()
    return recent, earlier


@pytest.fixture
def store_file(tmp_path: Path) -> tuple[Path, list[DecisionTrace], list[DecisionTrace]]:
    path = tmp_path / "traces.duckdb"
    return (path, *seed(path, datetime.now(UTC)))


def open_page(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], **params: str) -> AppTest:
    return open_app_page(PAGE, monkeypatch, env, **params)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_numbers_charts_misroutes_and_alerts(monkeypatch: pytest.MonkeyPatch, store_file: tuple) -> None:
    path, recent, earlier = store_file
    with stub.StubTraceApi([], alerts=stub.sample_alerts(datetime.now(UTC))) as api:
        at = open_page(monkeypatch, {DB_ENV: str(path), LIVE_ENV: api.url})
        assert any(p.startswith("/v1/alerts") for p in api.requests)

    assert not at.error
    assert_clean(at)
    got = metrics(at)
    assert list(got) == ["Requests", "Error rate", "Fallback rate", "Cost", "Latency p50", "Latency p95",
                         "Latency p99"]
    assert got["Requests"] == str(len(recent))
    errors = sum(t.outcome.status == "error" for t in recent)
    assert got["Error rate"] == fmt(errors / len(recent), "%")
    deltas = {m.label: m.proto.delta for m in at.metric}
    assert deltas["Requests"] == f"+{len(recent) - len(earlier)} (was {len(earlier)})"
    assert all("None" not in v and "nan" not in v for v in got.values())

    (series, *busiest) = [c for c in at.get("plotly_chart")]
    assert len(busiest) == 2
    misroutes = at.dataframe[0].value
    assert misroutes["request_id"].tolist() == [t.request_id for t in reversed(recent[-2:])]
    assert misroutes["open"].iloc[0] == f"/trace?request_id={recent[-1].request_id}"
    assert [s.value for s in at.subheader] == ["Recent misroutes", "Active alerts"]
    assert any(stub.ALERT_RULE in str(m.value) for m in at.markdown)


def test_a_window_of_days_dates_both_ends_and_alerts_link_to_the_probes_page_over_it(
        monkeypatch: pytest.MonkeyPatch, store_file: tuple) -> None:
    path, _, _ = store_file
    with stub.StubTraceApi([], alerts=stub.sample_alerts(datetime.now(UTC))) as api:
        at = open_page(monkeypatch, {DB_ENV: str(path), LIVE_ENV: api.url}, window="7d")
    now = datetime.now(UTC)
    caption = next(c.value for c in at.caption if "UTC." in c.value)
    # "2026-11-29 13:24 – 13:24 UTC" said nothing of the week between
    assert f"{now - timedelta(days=7):%Y-%m-%d}" in caption and f"– {now:%Y-%m-%d}" in caption, caption
    alerts = [str(m.value) for m in at.markdown if stub.ALERT_RULE in str(m.value)]
    assert alerts and all("probes?instance=" in a and "window=7d" in a for a in alerts), alerts


def test_a_filter_changes_the_numbers(monkeypatch: pytest.MonkeyPatch, store_file: tuple) -> None:
    path, recent, _ = store_file
    at = open_page(monkeypatch, {DB_ENV: str(path)})
    model, count = Counter(t.selected_model for t in recent).most_common()[-1]
    assert count < len(recent)

    at.text_input(key="sb_model").set_value(model).run()
    assert not at.exception
    assert metrics(at)["Requests"] == str(count)
    assert at.query_params["model"] == model
    # a file and no gateway: alerts say why they are missing, nothing fails
    assert any("Active alerts unavailable" in c.value for c in at.caption)


def test_deep_link_restores_window_and_model(monkeypatch: pytest.MonkeyPatch, store_file: tuple) -> None:
    path, recent, earlier = store_file
    model = recent[0].selected_model
    at = open_page(monkeypatch, {DB_ENV: str(path)}, window="6h", model=str(model))

    assert at.selectbox(key="sb_window").value == "6h" and at.text_input(key="sb_model").value == model
    expected = sum(t.selected_model == model for t in [*recent, *earlier])
    assert metrics(at)["Requests"] == str(expected)


def test_empty_store_shows_how_to_send_traffic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    DuckDBTraceStore(tmp_path / "empty.duckdb").close()
    at = open_page(monkeypatch, {DB_ENV: str(tmp_path / "empty.duckdb")})

    assert not at.error and not at.metric
    assert any("No traffic in this window yet" in i.value for i in at.info)
    assert "from openai import OpenAI" in at.code[0].value


def test_unreachable_store_is_a_banner(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    at = open_page(monkeypatch, {API_ENV: closed_port_url})

    assert len(at.error) == 1 and "Trace store unreachable" in at.error[0].value
    assert closed_port_url in at.error[0].value and not at.metric
