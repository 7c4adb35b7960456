from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd
import pytest

from app.ui.charts import probes as charts
from app.ui.data import probes as data
from app.ui.limits import Limits
from schemas.probe import ProbeResult
from tests.app import stub_trace_api as stub

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LIMITS = Limits(constraints=())  # the configuration's defaults: semantic 0.65, latency ±20%


@pytest.fixture
def results() -> list[ProbeResult]:
    return stub.sample_probe_results(NOW)


def colour_of(fig_json: dict, code: float) -> str:
    """The colour a heatmap z value gets from its colourscale (flat bands)."""
    trace = fig_json["data"][0]
    pos = (code - trace["zmin"]) / (trace["zmax"] - trace["zmin"])
    bands = trace["colorscale"]
    return next(colour for (lo, colour), (hi, _) in zip(bands, bands[1:], strict=False) if lo <= pos <= hi)


def test_verdict_grid_cells_and_colours(results: list[ProbeResult]) -> None:
    grid = data.last_verdicts(results, data.held_verdicts(stub.sample_router_state(NOW)), limits=LIMITS)
    order = data.instances_worst_first(grid)
    fig = json.loads(charts.verdict_grid_chart(grid, order).to_json())

    (heat,) = fig["data"]
    assert heat["type"] == "heatmap"
    assert heat["y"] == order and heat["x"] == list(data.KINDS)
    text = {(y, x): heat["text"][i][j] for i, y in enumerate(heat["y"]) for j, x in enumerate(heat["x"])}
    assert text[(stub.DRIFTING_INSTANCE, "semantic")] == "failed"
    assert text[(stub.DRIFTING_INSTANCE, "latency")] == "degraded"
    assert text[(stub.SYNTAX_ONLY_INSTANCE, "semantic")] == "no data"
    codes = {t: heat["z"][i][j] for i, row in enumerate(heat["text"]) for j, t in enumerate(row)}
    assert {t: colour_of(fig, z) for t, z in codes.items()} == charts.VERDICT_COLOURS
    i, j = order.index(stub.DRIFTING_INSTANCE), heat["x"].index("semantic")
    hover = heat["customdata"][i][j]
    assert "last result: failed" in hover and "0.310 / 0.650 (probes.semantic.threshold)" in hover


def test_a_cell_shows_the_routers_held_verdict_over_a_passing_last_result(results: list[ProbeResult]) -> None:
    """A cured instance is held out for recover_m probes: the grid showed it green while its alert fired."""
    healthy = next(r.instance for r in results if r.instance not in (stub.DRIFTING_INSTANCE, stub.SYNTAX_ONLY_INSTANCE))
    grid = data.last_verdicts(results, data.held_verdicts(stub.sample_router_state(NOW)), limits=LIMITS)
    row = (grid["instance"] == healthy) & (grid["kind"] == "syntax")
    assert grid.loc[row, "verdict"].tolist() == ["ok"]
    grid.loc[row, ["held"]] = "failed"  # the router still holds it out
    order = data.instances_worst_first(grid)
    heat = json.loads(charts.verdict_grid_chart(grid, order).to_json())["data"][0]
    i, j = order.index(healthy), heat["x"].index("syntax")
    assert heat["text"][i][j] == "failed" and "last result: ok" in heat["customdata"][i][j]
    assert order == [stub.DRIFTING_INSTANCE, healthy, stub.SYNTAX_ONLY_INSTANCE]  # a held failure ranks it up


def test_verdict_grid_default_order_and_empty(results: list[ProbeResult]) -> None:
    grid = data.last_verdicts(results, limits=LIMITS)
    assert json.loads(charts.verdict_grid_chart(grid).to_json())["data"][0]["y"] == sorted(set(grid["instance"]))
    assert charts.verdict_grid_chart(data.last_verdicts([], limits=LIMITS)).data == ()


def test_similarity_chart_has_threshold_line(results: list[ProbeResult]) -> None:
    frame = data.similarity_series(results, stub.DRIFTING_INSTANCE, limits=LIMITS)
    fig = charts.similarity_chart(frame, stub.DRIFTING_INSTANCE)

    assert [t.name for t in fig.data] == ["similarity", "threshold"]
    assert list(fig.data[1].y) == [0.65] * len(frame)
    assert fig.data[0].marker.color[-1] == charts.VERDICT_COLOURS["failed"]
    assert fig.data[0].marker.color[0] == charts.VERDICT_COLOURS["ok"]
    assert stub.DRIFTING_INSTANCE in fig.layout.title.text
    assert charts.similarity_chart(frame.iloc[0:0], "x").data == ()


def test_similarity_chart_without_threshold(results: list[ProbeResult]) -> None:
    frame = data.similarity_series(results, stub.HEALTHY_INSTANCE, limits=LIMITS).assign(threshold=float("nan"))
    assert [t.name for t in charts.similarity_chart(frame, "x").data] == ["similarity"]


def test_latency_chart_band_baseline_and_p95(results: list[ProbeResult]) -> None:
    frame = data.latency_series(results, stub.DRIFTING_INSTANCE, limits=LIMITS)
    fig = charts.latency_chart(frame, stub.DRIFTING_INSTANCE)

    assert [t.name for t in fig.data] == ["band_low", "±tolerance", "baseline", "p95"]
    low, high, base, p95 = fig.data
    assert high.fill == "tonexty" and not low.showlegend
    assert list(low.y)[0] == pytest.approx(640) and list(high.y)[0] == pytest.approx(960)
    assert list(base.y) == [800.0] * len(frame)
    assert p95.marker.color[-1] == charts.VERDICT_COLOURS["degraded"]
    assert charts.latency_chart(frame.iloc[0:0], "x").data == ()


def test_latency_chart_without_baseline_shows_only_p95(results: list[ProbeResult]) -> None:
    frame = data.latency_series(results, stub.HEALTHY_INSTANCE, limits=LIMITS).assign(baseline=float("nan"))
    assert [t.name for t in charts.latency_chart(frame, "x").data] == ["p95"]


def test_verdict_grid_of_a_big_fleet_is_dense(results: list[ProbeResult]) -> None:
    many = [r.model_copy(update={"instance": f"i{n:03d}"}) for n in range(charts.DENSE_ROWS + 1) for r in results[:3]]
    fig = charts.verdict_grid_chart(data.last_verdicts(many, limits=LIMITS))
    # the height below the top margin (title and column labels): 80 px and the rows
    assert fig.data[0].texttemplate == ""
    assert fig.layout.height - fig.layout.margin.t == 80 + 14 * (charts.DENSE_ROWS + 1)
    few = charts.verdict_grid_chart(data.last_verdicts(results, limits=LIMITS))
    assert few.data[0].texttemplate == "%{text}" and few.layout.height - few.layout.margin.t == 80 + 36 * 3


def test_latency_band_is_not_filled_across_a_gap(results: list[ProbeResult]) -> None:
    """Rows without a band (baseline relearned) split it: no fill spans the gap as a wedge."""
    frame = data.latency_series(results, stub.DRIFTING_INSTANCE, limits=LIMITS)
    assert len(frame) >= 3
    gap = frame.index[1]
    frame.loc[gap, ["baseline", "band_low", "band_high"]] = float("nan")
    fig = charts.latency_chart(frame, "x")

    bands = [t for t in fig.data if t.name in ("band_low", "±tolerance")]
    assert [t.name for t in bands] == ["band_low", "±tolerance"] * 2
    assert [t.showlegend for t in bands if t.name == "±tolerance"] == [True, False]
    shown = [pd.to_datetime(list(t.x), utc=True) for t in bands[::2]]
    assert [list(x) for x in shown] == [list(frame["ts"].iloc[:1]), list(frame["ts"].iloc[2:])]
    for trace in bands:  # each segment has only real edges
        assert all(y == y for y in trace.y)
