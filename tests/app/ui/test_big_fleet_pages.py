"""The app over a platform team's fleet: 200 instances (20 models × 10, 4 zones), as the audit ran it.

"Why this model" drew every candidate's score terms as one bar each: 200 bars, 8,120 px high.
"Latches now" drew a row of cells per instance: 7,300 px of green for 200 instances with three
latches out. Each chart now draws the rows worth a look and says how many it left to the tables.
Fleet health wrapped each model's tiles 8 to a row: 40 rows, 2,900 px; now a model a row, its
worst tiles first, within a screen.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from streamlit.testing.v1 import AppTest

from app.ui.data.big_fleet import CHART_CANDIDATES, GRID_ROWS
from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.state.parse import EngineGauges
from router_core.state.quality import QualityTable
from router_core.state.view import StateView
from schemas import DecisionTrace, Outcome, OutcomeStatus, RequestFeatures
from schemas.config import RouteLensConfig
from tests.app import stub_trace_api as stub
from tests.app.ui.pages import assert_clean, open_app_page
from tests.e2e.test_app_browser import CHROMIUM, CHROMIUM_ARGS, UI_TIMEOUT_MS, settle, streamlit_app

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")
NOW = datetime(2026, 12, 7, 5, 10, tzinfo=UTC)
MODELS, PER_MODEL = 20, 10
FLEET = [{"id": f"model-{m:02d}-{i}", "model": f"model-{m:02d}", "url": f"http://127.0.0.1:{18200 + 10 * m + i}",
          "zone": f"az{(10 * m + i) % 4 + 1}"} for m in range(MODELS) for i in range(PER_MODEL)]


def big_config() -> RouteLensConfig:
    return RouteLensConfig.model_validate({
        "fleet": {"instances": FLEET}, "scoring": {"preset": "balanced"},
        "models": {f"model-{m:02d}": {"quality": {"code": 0.9 - 0.01 * m}} for m in range(MODELS)},
        "constraints": [
            {"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85, "enter_below": 0.8},
            {"name": "queue", "metric": "queue", "threshold": 10, "enter_below": 6},
            {"name": "error-rate", "metric": "error_rate", "threshold": 0.15, "enter_below": 0.05},
        ],
    })


def decided_over_the_fleet() -> DecisionTrace:
    """One real decision (the router as the gateway runs it) over the 200 instances, every candidate recorded."""
    config, rng = big_config(), random.Random(7)
    view = StateView(config.fleet.instances, config.constraints, scrape=config.scrape, clock=lambda: 0.0,
                     wall=lambda: NOW)
    for spec in config.fleet.instances:
        view.update(spec.id, EngineGauges("vllm", rng.randint(0, 8), rng.randint(0, 8), rng.random() * 0.8, None))
    view.tick()
    router = build_router(config, metrics=CollectorRegistry())
    features = RequestFeatures(requested_model="auto", n_messages=1, input_chars=40, est_input_tokens=10)
    rec = TraceRecorder(request_id="req_big_fleet_0001", ts=NOW, router_version="audit", policy_hash=router.policy.hash,
                        query_hash="sha256:" + "0" * 64, features=features, intent="code")
    ctx = DecisionContext(request_id=rec.request_id, features=features, intent="code", now=NOW,
                          quality=QualityTable(config.models).snapshot())
    rec.record_decision(router.decide(ctx, view.snapshot()))
    return rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=99.5))


def router_state(out: dict[str, str]) -> dict[str, Any]:
    """``GET /v1/router/state`` of the 200 instances, the latches ``out`` ({instance: constraint}) out."""
    instances = []
    for spec in FLEET:
        latches = [{"constraint": c, "out": out.get(spec["id"]) == c, "since": None, "value": 0.1}
                   for c in ("error-rate", "kv-cache", "queue")]
        instances.append({"instance": spec["id"], "model": spec["model"], "stale": False, "latches": latches})
    return {"instances": instances}


def fleet_state(kv: dict[str, float]) -> dict[str, Any]:
    """``GET /v1/router/state`` of the 200 instances just scraped, KV-cache 30% but for ``kv`` ({instance: share})."""
    return {"instances": [{"instance": spec["id"], "model": spec["model"], "scraped_at": NOW.isoformat(),
                           "age_s": 0.4, "stale": False, "queue": 1, "kv_cache_usage": kv.get(spec["id"], 0.3)}
                          for spec in FLEET], "models": {}, "cluster": {}}


def charts(at: AppTest) -> dict[str, dict[str, Any]]:
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        title = spec["layout"].get("title", {}).get("text") or spec["data"][0].get("type")
        out[str(title)] = spec
    return out


@pytest.fixture(scope="module")
def trace() -> DecisionTrace:
    return decided_over_the_fleet()


@pytest.fixture
def served(trace: DecisionTrace) -> Iterator[stub.StubTraceApi]:
    out = {"model-03-4": "kv-cache", "model-11-0": "queue", "model-17-9": "error-rate"}
    with stub.StubTraceApi([trace], router_state=router_state(out)) as api:
        yield api


def test_why_this_model_draws_the_best_scored_candidates_and_keeps_every_one_in_its_tables(
    monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi, trace: DecisionTrace,
) -> None:
    assert len(trace.candidates) == 200 and trace.selected_instance is not None
    at = AppTest.from_file(str(__import__("app.ui", fromlist=["ENTRYPOINT"]).ENTRYPOINT), default_timeout=60)
    monkeypatch.setenv("ROUTELENS_API_URL", served.url)
    at.run()
    at.query_params["request_id"] = trace.request_id
    at.switch_page("views/trace_explorer.py").run()
    assert not at.exception, [e.value for e in at.exception]
    bars = next(spec for spec in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
                if spec["layout"].get("legend", {}).get("title", {}).get("text") == "term")
    drawn = set(bars["data"][0]["y"])
    assert len(drawn) == CHART_CANDIDATES and trace.selected_instance in drawn
    assert bars["layout"]["height"] <= 120 + 40 * (CHART_CANDIDATES + 1)
    said = [c.value for c in at.caption]
    assert f"The {CHART_CANDIDATES} best-scored candidates (and the one chosen) of 200; the tables below hold " \
           "every one." in said
    ranking = next(df.value for df in at.dataframe if "rank" in df.value.columns)
    assert len(ranking) == 200


def test_latches_now_draws_the_instances_held_out_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch, served: stub.StubTraceApi,
) -> None:
    at = open_app_page("views/constraints.py", monkeypatch, {"ROUTELENS_API_URL": served.url})
    assert_clean(at, charts_have_data=False)
    latches = charts(at)["Latches now"]
    assert [y for y in latches["data"][0]["y"]] == ["model-03-4", "model-11-0", "model-17-9"]
    assert latches["layout"]["height"] < 400
    said = [c.value for c in at.caption]
    assert "3 of 600 latches out on 3 of 200 instances." in said
    assert "Drawn: the instances with a latch out or stale state; 197 instances with every latch in are left to " \
           "the latch table." in said


UNWELL = {"model-03-4": 0.95, "model-11-6": 0.82, "model-11-8": 0.97}  # KV-cache: red, yellow, red


def test_fleet_health_shows_200_instances_within_a_screen_each_models_worst_tile_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = fleet_state(UNWELL)
    with stub.StubTraceApi([], router_state=state) as api:
        at = open_app_page("views/fleet.py", monkeypatch, {"ROUTELENS_API_URL": api.url})
    assert_clean(at)
    grid = charts(at)["Fleet health"]
    (heat,) = grid["data"]
    assert heat["y"] == [f"model-{m:02d}" for m in range(MODELS)] and len(heat["y"]) <= GRID_ROWS
    assert grid["layout"]["height"] <= 800  # was 2,900 px: 40 rows of 8 tiles
    tiles = {heat["y"][r]: [cell[1] for cell in row] for r, row in enumerate(heat["customdata"])}
    assert tiles["model-03"][0] == "model-03-4" and tiles["model-11"][:3] == ["model-11-8", "model-11-6", "model-11-0"]
    assert sorted(i for row in tiles.values() for i in row) == sorted(spec["id"] for spec in FLEET)
    said = [c.value for c in at.caption]
    assert "200 instances, 10 tiles a row, each model's worst first (red, yellow, grey, then green); hover a tile " \
           "for its metrics, click it to open the instance." in said
    assert at.selectbox(key="fleet_instance").options[:3] == ["model-03-4", "model-11-8", "model-11-6"]
    assert len(at.expander[0].dataframe[0].value) == 200


@pytest.mark.e2e
@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} missing: apt-get install -y chromium")
def test_fleet_health_at_200_instances_renders_within_a_screen_at_1280_px(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing: pip install playwright")
    with stub.StubTraceApi([], router_state=fleet_state(UNWELL)) as api, \
            streamlit_app(tmp_path, {"ROUTELENS_API_URL": api.url}) as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{url}/fleet")
            grid = page.locator(".js-plotly-plot").first
            sync_api.expect(grid).to_be_visible(timeout=UI_TIMEOUT_MS)
            settle(page)
            page.screenshot(path=str(tmp_path / "fleet-200.png"))
            box = grid.bounding_box()
            assert box is not None
            assert box["height"] <= 800, f"the grid is {box['height']:.0f} px high"  # was 2,900
            assert box["x"] + box["width"] <= 1280, box
            sync_api.expect(page.locator(".js-plotly-plot text", has_text="model-03-4")).to_have_count(1)
        finally:
            browser.close()
