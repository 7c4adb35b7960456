"""The Fleet health page, run by AppTest over a DuckDB store seeded here and the stub API's live state."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.reader import API_ENV, DB_ENV
from app.ui.charts.fleet import STATUS_COLOURS
from app.ui.data.fleet import LIVE_ENV, STATUSES
from app.ui.limits import CONFIG_ENV
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from schemas import DecisionTrace
from schemas.fleet import InstanceSnapshot, LatchState
from schemas.records import RouterEvent
from tests.app import stub_trace_api as stub
from tests.app.ui.pages import assert_clean, open_app_page

PAGE = "views/fleet.py"
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")
HOT = "inst-0"  # deepseek-v4-32k: KV-cache above 95% from 35 to 25 minutes ago, latched out meanwhile


def stored_snapshots(now: datetime) -> list[InstanceSnapshot]:
    """One a minute over the last 50 minutes, one a second from 31 to 29 minutes ago (the slider's -30m stop:
    older than 5 s at the moment shown is stale)."""
    out = []
    dense = [timedelta(minutes=29, seconds=s) for s in range(120, 0, -1)]
    for back in sorted({*(timedelta(minutes=m) for m in range(50, 0, -1)), *dense}, reverse=True):
        ts, minutes = now - back, back.total_seconds() / 60
        hot = 25 <= minutes <= 35
        since = now - timedelta(minutes=35) if hot else now - timedelta(minutes=24) if minutes < 25 else None
        latch = LatchState(constraint="kv-cache", out=hot, since=since, value=0.97 if hot else 0.5)
        out.append(InstanceSnapshot(instance=HOT, model="deepseek-v4-32k", scraped_at=ts, age_s=0.3,
                                    kv_cache_usage=0.97 if hot else 0.5, queue=2, latches=[latch]))
        out.append(InstanceSnapshot(instance="inst-1", model="deepseek-coder-6b-fp16", scraped_at=ts, age_s=0.3,
                                    kv_cache_usage=0.3, queue=4))
    return out


def live_state(now: datetime) -> dict[str, Any]:
    def snap(instance: str, model: str, **gauges: Any) -> dict[str, Any]:
        return InstanceSnapshot.model_validate({"instance": instance, "model": model, "scraped_at": now,
                                                "age_s": 0.4, **gauges}).model_dump(mode="json")

    return {"instances": [snap(HOT, "deepseek-v4-32k", kv_cache_usage=0.5, queue=1),
                          snap("inst-1", "deepseek-coder-6b-fp16", queue=60, kv_cache_usage=0.2),
                          snap("inst-2", "qwen-72b", kv_cache_usage=0.92, stale=True, age_s=8.0),
                          snap("inst-3", "qwen-72b", kv_cache_usage=0.88, queue=2)],
            "models": {}, "cluster": {}}


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, list[DecisionTrace], datetime]:
    now = datetime.now(UTC)
    traces = list(TraceFactory(seed=4, n_candidates=2, start=now - timedelta(minutes=40), step=timedelta(seconds=30),
                               round_every=1000).traces(30))
    store = DuckDBTraceStore(tmp_path / "fleet.duckdb")
    store.write_records([*traces, *stored_snapshots(now), RouterEvent(
        event_id="e-1", ts=now - timedelta(minutes=20), kind="breaker", instance=HOT, message="breaker closed")])
    store.close()
    return tmp_path / "fleet.duckdb", traces, now


# The router removes an instance above 85% KV-cache (back in below 80%) or past 10 waiting requests.
CONFIG = """
fleet:
  instances: [{id: inst-0, model: deepseek-v4-32k, url: "http://127.0.0.1:9"}]
constraints:
  - {name: kv-cache, metric: kv_cache_usage, op: "<=", threshold: 0.85, enter_below: 0.80}
  - {name: queue, metric: queue, op: "<=", threshold: 10}
"""


def open_page(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], **params: str) -> AppTest:
    config = Path(env.get(DB_ENV) or env.get(API_ENV, "x")).with_name("routelens-test.yaml")
    if DB_ENV in env:
        config.write_text(CONFIG, encoding="utf-8")
    return open_app_page(PAGE, monkeypatch, {CONFIG_ENV: str(config), **env}, **params)


def grid_cells(at: AppTest) -> dict[str, str]:
    """instance -> ``status: label`` of its tile, read from the grid figure (colour code and text)."""
    (heat,) = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    out = {}
    for zs, texts in zip(heat["z"], heat["text"], strict=True):
        for z, text in zip(zs, texts, strict=True):
            if text:
                instance, label = text.split("<br>", 1)
                out[instance] = f"{STATUSES[int(z)]}: {label}"
    return out


def test_live_grid_colours_and_worst_first(monkeypatch: pytest.MonkeyPatch, seeded: tuple) -> None:
    path, _, now = seeded
    with stub.StubTraceApi([], router_state=live_state(now)) as api:
        at = open_page(monkeypatch, {DB_ENV: str(path), LIVE_ENV: api.url})
        assert "/v1/router/state" in api.requests

    assert not at.error
    assert_clean(at)
    # One metric per tile, as value / limit, coloured by the constraint the router removes by: 88% is red
    # (the old fixed 90% / 95% bands showed it green while the router excluded the instance).
    assert grid_cells(at) == {HOT: "green: kv 50% / 85%", "inst-1": "green: kv 20% / 85%",
                              "inst-2": "grey: stale 8 s", "inst-3": "red: kv 88% / 85%"}
    (heat,) = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    assert heat["y"] == ["deepseek-coder-6b-fp16", "deepseek-v4-32k", "qwen-72b"]
    assert heat["text"][0][0] == "inst-1<br>kv 20% / 85%" and STATUS_COLOURS["red"] in json.dumps(heat["colorscale"])
    assert any("Live state" in c.value and "constraint kv-cache" in c.value for c in at.caption)
    # The queue over its limit on a tile showing KV is said, not hidden.
    assert [w.value for w in at.warning] == ["Over a limit on another metric: inst-1 (queue 60 / 10 requests). "
                                             "Pick that metric above to see it."]
    assert at.selectbox(key="fleet_instance").options == ["inst-3", "inst-2", "inst-1", HOT]
    assert at.selectbox(key="fleet_instance").value is None


def test_slider_shows_a_past_moment_from_snapshots(monkeypatch: pytest.MonkeyPatch, seeded: tuple) -> None:
    path, _, now = seeded
    with stub.StubTraceApi([], router_state=live_state(now)) as api:
        at = open_page(monkeypatch, {DB_ENV: str(path), LIVE_ENV: api.url}, at="1800")
        assert at.select_slider(key="fleet_at").value == 1800
        cells = grid_cells(at)
        assert cells[HOT] == "red: kv 97% / 85%<br>out: kv-cache" and cells["inst-1"] == "green: kv 30% / 85%"
        assert cells["inst-2"] == "grey: no snapshot"  # live names it, the store has none
        assert any("Stored snapshots at" in c.value for c in at.caption)

        at.select_slider(key="fleet_at").set_value(0).run()
        assert grid_cells(at)[HOT] == "green: kv 50% / 85%" and "at" not in at.query_params

        at.selectbox(key="fleet_metric").set_value("queue").run()
        assert grid_cells(at)["inst-1"] == "red: queue 60 / 10 requests" and at.query_params["metric"] == "queue"


def test_deep_link_opens_an_instance(monkeypatch: pytest.MonkeyPatch, seeded: tuple) -> None:
    path, traces, now = seeded
    at = open_page(monkeypatch, {DB_ENV: str(path)}, instance=HOT)

    assert not at.error
    assert any("Stored snapshots at" in c.value for c in at.caption)  # a file and no gateway
    assert at.selectbox(key="fleet_instance").value == HOT
    assert [s.value for s in at.subheader] == [HOT]
    grid, metrics = at.get("plotly_chart")
    assert f"{HOT} over the window" in metrics.proto.spec
    assert_clean(at)
    _, transitions, served = (d.value for d in at.dataframe)
    assert transitions["what"].tolist() == ["kv-cache out", "kv-cache back in", "breaker"]
    assert transitions["detail"].iloc[0] == "held out of the feasible set (97% / 85%)"
    spec = json.loads(metrics.proto.spec)
    assert {a["text"] for a in spec["layout"]["annotations"]} >= {"constraint kv-cache 85%", "80%"}
    # The whole window: every stored snapshot (the dense two minutes too, not a page of 50), on an axis over it.
    stored = len([s for s in stored_snapshots(now) if s.instance == HOT])
    kv = spec["data"][0]
    assert stored == 168 and sum(text != "—" for text in kv["text"]) == stored and kv["text"][0] == "50%"
    assert any(c.value.startswith(f"{stored} scrapes of the window (the gauges as scraped)") for c in at.caption)
    first, last = (datetime.fromisoformat(t) for t in spec["layout"]["xaxis"]["range"])
    assert last - first == timedelta(hours=1) and first < datetime.fromisoformat(kv["x"][0])
    mine = [t for t in traces if t.selected_instance == HOT]
    assert mine and served["request_id"].tolist() == [t.request_id for t in reversed(mine)]
    assert served["open"].iloc[0] == f"/trace?request_id={mine[-1].request_id}"


def test_picking_an_instance_opens_it(monkeypatch: pytest.MonkeyPatch, seeded: tuple) -> None:
    path, _, _ = seeded
    at = open_page(monkeypatch, {DB_ENV: str(path)})
    assert not at.subheader

    at.selectbox(key="fleet_instance").set_value("inst-1").run()
    assert not at.exception and [s.value for s in at.subheader] == ["inst-1"]
    assert any("No latch changed" in c.value for c in at.caption)


def test_a_metric_no_constraint_bounds_uses_the_app_settings(monkeypatch: pytest.MonkeyPatch,
                                                               seeded: tuple) -> None:
    path, _, now = seeded
    config = path.with_name("tight-ttft.yaml")
    config.write_text(CONFIG + "app:\n  health: {ttft_p95_ms: {yellow: 10, red: 20}}\n", encoding="utf-8")
    state = live_state(now)
    state["instances"][1]["ttft_p95_ms"] = 39.0
    with stub.StubTraceApi([], router_state=state) as api:
        at = open_page(monkeypatch, {DB_ENV: str(path), LIVE_ENV: api.url, CONFIG_ENV: str(config)},
                       metric="ttft_p95_ms")
    assert grid_cells(at)["inst-1"] == "red: p95 TTFT 39 ms / 20 ms"
    assert any("app.health.ttft_p95_ms" in c.value for c in at.caption)


def test_empty_store_and_no_gateway_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    DuckDBTraceStore(tmp_path / "empty.duckdb").close()
    at = open_page(monkeypatch, {DB_ENV: str(tmp_path / "empty.duckdb")})
    assert not at.error and any("No instance state at this moment" in i.value for i in at.info)


def test_unreachable_store_is_a_banner(monkeypatch: pytest.MonkeyPatch, closed_port_url: str) -> None:
    at = open_page(monkeypatch, {API_ENV: closed_port_url})
    assert len(at.error) == 1 and "Trace store unreachable" in at.error[0].value
