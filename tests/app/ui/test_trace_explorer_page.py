"""The trace explorer page, run by AppTest against a real loopback stub of the read API."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from app.ui import ENTRYPOINT
from tests.app import stub_trace_api as stub

APP = str(ENTRYPOINT)
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def run_app(monkeypatch: pytest.MonkeyPatch, api_url: str, request_id: str | None) -> AppTest:
    monkeypatch.setenv("ROUTELENS_API_URL", api_url)
    at = AppTest.from_file(APP, default_timeout=30)
    if request_id is not None:
        at.query_params["request_id"] = request_id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def markdown_text(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in at.markdown)


def test_found_trace_shows_selection_and_rejected_candidate(
    monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi
) -> None:
    at = run_app(monkeypatch, stub_api.url, stub.SAMPLE_REQUEST_ID)

    assert at.text_input(key="request_id").value == stub.SAMPLE_REQUEST_ID
    assert not at.error and not at.info
    text = markdown_text(at)
    assert f"Selected `{stub.SELECTED_MODEL}` → `{stub.SELECTED_INSTANCE}`" in text
    assert f"`{stub.REJECTED_INSTANCE}`: kv-cache: kv_cache_usage 0.97 > 0.9 — {stub.KV_REASON}" in text
    assert [w.value for w in at.warning] == [f"Fallback: {stub.FALLBACK_REASON}"]

    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {
        "Fallback": "yes",
        "Mode": "normal",
        "Decision latency": "1.84 ms",
        "Outcome": "ok · HTTP 200",
        "Total time": "3,890 ms",
    }

    assert [s.value for s in at.subheader] == ["Candidates", "Decision steps", "Attempts"]
    candidates, steps, attempts = (df.value for df in at.dataframe)
    by_instance = candidates.set_index("instance")
    assert by_instance.loc[stub.REJECTED_INSTANCE, "verdict"] == "rejected"
    assert by_instance.loc[stub.SELECTED_INSTANCE, "selected"]
    assert {"queue-depth", "kv-cache", "latency", "total", "rank"} <= set(candidates.columns)
    assert candidates["instance"].tolist()[0] == stub.TOP_RANKED
    assert len(steps) == 10 and steps["step"].tolist()[2] == "filter/kv-cache"
    assert attempts["status"].tolist() == ["timeout", "ok"]
    (chart,) = at.get("plotly_chart")
    bars = json.loads(chart.proto.spec)["data"]
    assert [b["name"] for b in bars] == ["queue-depth", "kv-cache", "latency"]
    assert bars[0]["y"] == [stub.TOP_RANKED, stub.SELECTED_INSTANCE]

    raw = at.expander[1]
    assert raw.label == "Raw trace JSON"
    assert raw.json[0].value.count(stub.SAMPLE_REQUEST_ID) >= 1
    assert stub_api.requests == [f"/v1/traces/{stub.SAMPLE_REQUEST_ID}"]


def test_unknown_id_warns(monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi) -> None:
    at = run_app(monkeypatch, stub_api.url, "req-nope")

    assert len(at.warning) == 1
    assert "No trace found for request_id 'req-nope'" in at.warning[0].value
    assert not at.error
    assert not at.dataframe


def test_unreachable_api_errors(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    at = run_app(monkeypatch, closed_port_url, "req-7f3a9c")

    assert len(at.error) == 1
    assert "Trace source unreachable" in at.error[0].value
    assert closed_port_url in at.error[0].value
    assert not at.warning and not at.dataframe


def test_empty_id_asks_for_one_and_fetches_nothing(
    monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi
) -> None:
    at = run_app(monkeypatch, stub_api.url, None)

    assert len(at.info) == 1 and "request_id" in at.info[0].value
    assert stub_api.requests == []


def test_typing_an_id_loads_it_and_updates_the_url(
    monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi
) -> None:
    at = run_app(monkeypatch, stub_api.url, None)

    at.text_input(key="request_id").set_value(f"  {stub.SAMPLE_REQUEST_ID} ").run()

    assert not at.exception
    assert at.query_params["request_id"] == stub.SAMPLE_REQUEST_ID
    assert f"`{stub.SELECTED_INSTANCE}`" in markdown_text(at)

    at.text_input(key="request_id").set_value("").run()
    assert "request_id" not in at.query_params
