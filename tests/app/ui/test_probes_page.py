"""The "Probes & alerts" page, run by AppTest against a real loopback stub of the read API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.ui.limits import CONFIG_ENV
from tests.app import stub_trace_api as stub
from tests.app.ui.pages import assert_clean, open_app_page

PAGE = "views/probes.py"
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def probe_stub(*, alerts: bool = True, state: bool = True) -> stub.StubTraceApi:
    # The page reads a window ending at the wall clock; the samples are the 10 minutes before it.
    now = datetime.now(UTC)
    return stub.StubTraceApi(
        [], probes=stub.sample_probe_results(now), events=stub.sample_events(now),
        alerts=stub.sample_alerts(now) if alerts else None,
        router_state=stub.sample_router_state(now) if state else None,
    )


@pytest.fixture
def probe_api() -> Iterator[stub.StubTraceApi]:
    with probe_stub() as api:
        yield api


def open_page(monkeypatch: pytest.MonkeyPatch, api_url: str, **params: str) -> AppTest:
    return open_app_page(PAGE, monkeypatch, {"ROUTELENS_API_URL": api_url}, **params)


def charts(at: AppTest) -> list[dict[str, Any]]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def markdown_text(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in at.markdown)


def test_grid_alerts_and_the_worst_instance(monkeypatch: pytest.MonkeyPatch, probe_api: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, probe_api.url)

    assert not at.error and not at.warning
    assert_clean(at)
    grid, similarity, latency = charts(at)
    heat = grid["data"][0]
    assert heat["type"] == "heatmap" and heat["y"][0] == stub.DRIFTING_INSTANCE
    assert heat["text"][0] == ["ok", "degraded", "failed"]
    assert stub.DRIFTING_INSTANCE in similarity["layout"]["title"]["text"]
    assert [t["name"] for t in latency["data"]] == ["band_low", "±tolerance", "baseline", "p95"]

    text = markdown_text(at)
    link = f"[`{stub.DRIFTING_INSTANCE}`](probes?instance={stub.DRIFTING_INSTANCE}&window=1h)"
    assert f"**{stub.ALERT_RULE}** (critical) on {link}" in text
    # what the instance showed, under the rule's summary (escaped: a reason reads literally)
    assert any("value 0.31 similarity 0.31 < 0.65 to zh-summary" in c.value.replace("\\", "") for c in at.caption)
    assert at.selectbox(key="instance").value == stub.DRIFTING_INSTANCE
    assert at.query_params["window"] == "1h" and at.query_params["instance"] == stub.DRIFTING_INSTANCE
    assert [s.value for s in at.subheader] == [
        "Active alerts", f"When {stub.DRIFTING_INSTANCE} was bad, and the requests it served", "Recent alerts"]
    assert any(f"{stub.DRIFTING_INSTANCE} served no request in this window" in s.value for s in at.success)

    verdicts = at.dataframe[0].value.set_index(["instance", "kind"])
    assert verdicts.loc[(stub.DRIFTING_INSTANCE, "semantic"), "router verdict"] == "failed"
    assert verdicts.loc[(stub.DRIFTING_INSTANCE, "semantic"), "value / limit"] == "0.310 / 0.650"
    assert verdicts.loc[(stub.DRIFTING_INSTANCE, "latency"), "value / limit"] == "1,275 ms / 640–960 ms"
    results = at.dataframe[1].value
    assert results.iloc[0]["probe took"] == "50 ms" and "value / limit" in results.columns
    recent = at.dataframe[-1].value
    assert recent["rule"].tolist() == [stub.ALERT_RULE, "LatencyCreep", "LatencyCreep"]
    assert recent["link"].iloc[0].startswith(f"?instance={stub.DRIFTING_INSTANCE}&at=")
    assert any(p.startswith("/v1/alerts") for p in probe_api.requests)
    assert any("kind=alert" in p for p in probe_api.requests if p.startswith("/v1/events"))


def test_the_running_config_sets_the_colours(monkeypatch: pytest.MonkeyPatch, probe_api: stub.StubTraceApi,
                                             tmp_path: Path) -> None:
    """Under a semantic threshold of 0.9 the healthy instance's 0.86 is red, and the page says whose limit it is."""
    config = tmp_path / "routelens.yaml"
    config.write_text("fleet:\n  instances:\n    - {id: a-0, model: big, url: 'http://127.0.0.1:9'}\n"
                      "probes:\n  semantic: {threshold: 0.9}\n", encoding="utf-8")
    monkeypatch.setenv(CONFIG_ENV, str(config))
    at = open_page(monkeypatch, probe_api.url)

    assert_clean(at)
    heat = charts(at)[0]["data"][0]
    cells = {(y, x): heat["text"][i][j] for i, y in enumerate(heat["y"]) for j, x in enumerate(heat["x"])}
    assert cells[(stub.HEALTHY_INSTANCE, "semantic")] == "failed"
    verdicts = at.dataframe[0].value.set_index(["instance", "kind"])
    assert verdicts.loc[(stub.HEALTHY_INSTANCE, "semantic"), "value / limit"] == "0.860 / 0.900"
    assert any(f"Judged against {config.resolve()}: semantic similarity ≥ 0.900" in c.value for c in at.caption)


def test_no_results_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    with stub.StubTraceApi([]) as api:
        at = open_page(monkeypatch, api.url)

    assert not at.error
    assert any("No probe results yet" in i.value for i in at.info)
    assert any("Active alerts unavailable" in w.value for w in at.warning)
    assert not at.get("plotly_chart") and not at.selectbox
    assert "No alert fired or resolved in the window." in [c.value for c in at.caption]


def test_url_picks_instance_and_window(monkeypatch: pytest.MonkeyPatch, probe_api: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, probe_api.url, instance=stub.HEALTHY_INSTANCE, window="15m")

    assert at.selectbox(key="instance").value == stub.HEALTHY_INSTANCE
    assert at.radio(key="window").value == "15m"
    assert stub.HEALTHY_INSTANCE in charts(at)[1]["layout"]["title"]["text"]

    at.radio(key="window").set_value("6h").run()
    assert not at.exception
    assert at.query_params["window"] == "6h"
    at.selectbox(key="instance").set_value(stub.SYNTAX_ONLY_INSTANCE).run()
    assert at.query_params["instance"] == stub.SYNTAX_ONLY_INSTANCE
    assert any(f"No semantic probe results for `{stub.SYNTAX_ONLY_INSTANCE}`" in i.value for i in at.info)


def test_an_instance_without_results_is_not_said_to_pass(monkeypatch: pytest.MonkeyPatch,
                                                          probe_api: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, probe_api.url, instance="nope")

    assert at.selectbox(key="instance").value == "nope"
    captions = [c.value for c in at.caption]
    assert any(c.startswith("No probe results of nope in the window") for c in captions)
    assert not any("Every probe of nope passed" in c for c in captions)


def test_a_week_is_a_window(monkeypatch: pytest.MonkeyPatch, probe_api: stub.StubTraceApi) -> None:
    at = open_page(monkeypatch, probe_api.url, window="7d")

    assert at.radio(key="window").value == "7d" and at.query_params["window"] == "7d"


def test_alerts_endpoint_missing_is_said_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    with probe_stub(alerts=False, state=False) as api:
        at = open_page(monkeypatch, api.url)

    assert not at.error
    assert [w.value for w in at.warning] == [
        "Active alerts unavailable (GET /v1/alerts: HTTP 404 from the server at "
        f"{api.url}); recent alert events are below."
    ]
    assert any("Router verdicts (hysteresis) unavailable" in c.value for c in at.caption)
    assert charts(at)[0]["data"][0]["y"][0] == stub.DRIFTING_INSTANCE


def test_unreachable_api_errors(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    at = open_page(monkeypatch, closed_port_url)

    assert len(at.error) == 1 and "Probe source unreachable" in at.error[0].value
    assert closed_port_url in at.error[0].value


def test_live_reads_need_a_server() -> None:
    from app import reader

    assert reader.api_from_env({"ROUTELENS_DB": "/x.duckdb", "ROUTELENS_API_URL": "http://a"}) is None
    env = {"ROUTELENS_API_URL": "http://a:1/", "ROUTELENS_READ_TOKEN": " t "}
    assert reader.api_from_env(env) == ("http://a:1", "t")
    assert reader.api_from_env({}) == (reader.DEFAULT_API_URL, None)


def test_fetch_json_answers_and_errors(closed_port_url: str) -> None:
    from app import reader
    from ingest import SinkError, SinkUnavailable

    with stub.StubTraceApi([], responses={"odd": (200, b"not json")}) as api:
        assert reader.fetch_json(api.url, "/v1/events") == {"events": []}
        with pytest.raises(SinkError, match="not JSON"):
            reader.fetch_json(api.url, "/v1/traces/odd")
        with pytest.raises(SinkError, match="HTTP 404"):
            reader.fetch_json(api.url, "/v1/alerts")
    with pytest.raises(SinkUnavailable, match="unreachable"):
        reader.fetch_json(closed_port_url, "/v1/alerts")
