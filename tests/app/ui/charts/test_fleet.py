"""The fleet figures: the grid's colour per status, its cell text and hover, wrapping, the instance chart."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from app.ui.charts import fleet as charts
from app.ui.data import fleet as data
from app.ui.limits import Limits
from schemas.config import ConstraintSpec
from schemas.fleet import InstanceSnapshot, LatchState

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TH = Limits(constraints=(
    ConstraintSpec(name="kv-cache", metric="kv_cache_usage", threshold=0.85, enter_below=0.80),
    ConstraintSpec(name="queue", metric="queue", threshold=10),
))


def snap(instance: str, model: str = "m", **gauges: Any) -> InstanceSnapshot:
    return InstanceSnapshot.model_validate({"instance": instance, "model": model, "scraped_at": NOW, "age_s": 0.2,
                                            **gauges})


def colour_of(trace: dict[str, Any], code: float) -> str:
    pos = (code - trace["zmin"]) / (trace["zmax"] - trace["zmin"])
    bands = trace["colorscale"]
    return next(colour for (lo, colour), (hi, _) in zip(bands, bands[1:], strict=False) if lo <= pos <= hi)


def test_grid_colours_text_and_hover() -> None:
    grid = data.cells([snap("a-1", kv_cache_usage=0.5), snap("a-2", kv_cache_usage=0.82),
                       snap("a-3", kv_cache_usage=0.9, queue=70), snap("a-4", stale=True)], TH)
    (heat,) = json.loads(charts.health_grid_chart(grid).to_json())["data"]
    assert heat["type"] == "heatmap" and heat["y"] == ["m"]
    colours = [colour_of(heat, z) for z in heat["z"][0]]
    assert colours == [charts.STATUS_COLOURS[s] for s in ("green", "yellow", "red", "grey")]
    assert heat["text"][0][2] == "a-3<br>kv 90% / 85%"
    hover, instance = heat["customdata"][0][1]
    assert instance == "a-2" and "kv: 82% / 85%" in hover and "yellow" in hover and "None" not in hover


def test_grid_rows_per_model_wrap_and_click_lookup() -> None:
    snaps = [snap(f"a-{i}", kv_cache_usage=0.1) for i in range(charts.MAX_COLUMNS + 2)] + [snap("b-1", model="n")]
    grid = data.cells(snaps, TH)
    (heat,) = json.loads(charts.health_grid_chart(grid).to_json())["data"]
    assert heat["y"] == ["m", "m ·2", "n"] and len(heat["z"][0]) == charts.MAX_COLUMNS
    assert heat["z"][1][2] is None and heat["z"][2][1] is None
    assert charts.instance_at(grid, "n", 0) == "b-1" and charts.instance_at(grid, "n", 1) is None
    assert charts.instance_at(grid, "m ·2", 1) == grid[grid["model"] == "m"]["instance"].tolist()[9]


def test_empty_grid_has_no_trace() -> None:
    assert not charts.health_grid_chart(data.cells([], TH)).data


def test_instance_chart_panels_thresholds_and_latch_lines() -> None:
    t1 = NOW - timedelta(minutes=2)
    out = LatchState(constraint="kv-cache", out=True, since=t1)
    snaps = [snap("a", kv_cache_usage=0.96, latches=[out]).model_copy(update={"scraped_at": t1}),
             snap("a", kv_cache_usage=0.4)]
    series, moves = data.instance_series(snaps), data.latch_transitions(snaps)
    figure = charts.instance_metrics_chart(series, TH, "a", moves)
    fig = json.loads(figure.to_json())
    assert [t["name"] for t in fig["data"]] == ["KV-cache", "queue", "errors", "p95 TTFT"]
    assert list(figure.data[0].y) == [0.96, 0.4]
    lines = [s for s in fig["layout"]["shapes"] if s["y0"] == s["y1"]]
    # The router's own limits: kv out above 85%, back below 80%; queue out past 10; errors app.health 1% / 5%.
    assert {(s["y0"], s["line"]["color"]) for s in lines} == {
        (0.8, "#f0a202"), (0.85, "#d62728"), (10, "#d62728"), (0.01, "#f0a202"), (0.05, "#d62728"),
        (2000, "#f0a202"), (5000, "#d62728")}
    notes = {a["text"] for a in fig["layout"]["annotations"]}
    assert {"constraint kv-cache 85%", "constraint queue 10 requests", "app.health.error_rate 5%"} <= notes
    assert fig["layout"]["yaxis"]["tickformat"] == ".0%" and fig["layout"]["yaxis4"]["ticksuffix"] == " ms"
    vertical = [s for s in fig["layout"]["shapes"] if s["x0"] == s["x1"]]
    assert len(vertical) == 4  # the latch going out, on each panel
    assert {v["line"]["color"] for v in vertical} == {charts.STATUS_COLOURS["red"]}
    assert "a over the window" in fig["layout"]["title"]["text"]
