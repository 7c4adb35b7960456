"""The health grid from the demo's 4-12 instances to a platform team's 200: height, rows, order, clicks.

At 200 instances (20 models × 10) the grid wrapped each model 8 to a row: 40 rows, 2,900 px, the
one red tile somewhere in screens of green. Frames in (:func:`app.ui.data.fleet.cells` of real
snapshots), figures out.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest

from app.ui.charts import fleet as charts
from app.ui.data import big_fleet
from app.ui.data import fleet as data
from app.ui.limits import Limits
from schemas.config import ConstraintSpec
from schemas.fleet import InstanceSnapshot

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TH = Limits(constraints=(ConstraintSpec(name="kv-cache", metric="kv_cache_usage", threshold=0.85, enter_below=0.80),))
SCREEN_PX = 800  # about a screen: the grid must read without scrolling past it
GAUGES = {"red": {"kv_cache_usage": 0.95}, "yellow": {"kv_cache_usage": 0.82}, "green": {"kv_cache_usage": 0.3},
          "grey": {"kv_cache_usage": 0.3, "stale": True}}


def fleet(models: int, per_model: int, unwell: dict[str, str] | None = None) -> pd.DataFrame:
    """``models × per_model`` instances ``model-MM-I``, green but for ``unwell`` ({instance: status})."""
    snaps = []
    for m in range(models):
        for i in range(per_model):
            name = f"model-{m:02d}-{i}"
            gauges = GAUGES[(unwell or {}).get(name, "green")]
            snaps.append(InstanceSnapshot.model_validate({"instance": name, "model": f"model-{m:02d}",
                                                          "scraped_at": NOW, "age_s": 0.2, **gauges}))
    return data.cells(snaps, TH)


def heatmap(cells: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    fig = json.loads(charts.health_grid_chart(cells).to_json())
    (heat,) = fig["data"]
    return heat, fig["layout"]


def at(heat: dict[str, Any], row: str, column: int) -> str | None:
    """The instance a click on ``(row, column)`` selects through the figure's ``customdata``."""
    got = heat["customdata"][heat["y"].index(row)][column][1]
    return None if got is None else str(got)


@pytest.mark.parametrize(("models", "per_model", "rows"), [
    (2, 2, ["model-00", "model-01"]),
    (3, 4, ["model-00", "model-01", "model-02"]),
    (1, 12, ["model-00", "model-00 ·2"]),
    (12, 1, [f"model-{m:02d}" for m in range(12)]),
], ids=["4-instances", "12-on-3-models", "12-on-1-model", "12-on-12-models"])
def test_the_demos_sizes_keep_8_named_tiles_a_row_in_name_order(models: int, per_model: int, rows: list[str]) -> None:
    cells = fleet(models, per_model, {"model-00-1": "red"} if per_model > 1 else {"model-00-0": "red"})
    heat, layout = heatmap(cells)
    assert heat["y"] == rows and layout["height"] == 100 + 70 * len(rows)
    assert len(heat["z"][0]) == min(charts.MAX_COLUMNS, per_model)
    first = cells[cells["model"] == "model-00"]["instance"].tolist()
    assert [at(heat, "model-00", c) for c in range(min(8, per_model))] == first[:8]  # name order, the red too
    assert heat["text"][0][0] == f"{first[0]}<br>{cells.iloc[0]['label']}"
    assert big_fleet.grid_caption(big_fleet.grid_layout(cells), len(cells)) is None


def test_200_instances_fit_a_screen_a_model_a_row_its_worst_tiles_first() -> None:
    unwell = {"model-03-4": "red", "model-11-7": "yellow", "model-11-2": "red", "model-17-9": "grey"}
    cells = fleet(20, 10, unwell)
    heat, layout = heatmap(cells)
    assert heat["y"] == [f"model-{m:02d}" for m in range(20)]
    assert all(len(row) == 10 for row in heat["z"])
    assert layout["height"] <= SCREEN_PX  # was 2,900 px: 40 rows of 8
    assert [at(heat, "model-11", c) for c in range(3)] == ["model-11-2", "model-11-7", "model-11-0"]
    assert at(heat, "model-03", 0) == "model-03-4" and at(heat, "model-17", 0) == "model-17-9"
    assert at(heat, "model-03", 1) == "model-03-0"
    # The tiles needing a look are named in them; a green one is bare (its hover still says everything).
    assert heat["text"][3][0] == "model-03-4" and heat["text"][3][1] == ""
    assert "model-03-0" in heat["customdata"][3][1][0]
    drawn = [i for row in heat["customdata"] for _, i in row if i is not None]
    assert sorted(drawn) == sorted(cells["instance"])


def test_a_click_on_the_200_instance_grid_selects_the_tile_drawn_there() -> None:
    cells = fleet(20, 10, {"model-05-8": "red", "model-05-3": "yellow"})
    heat, _ = heatmap(cells)
    for row in ("model-05", "model-00", "model-19"):
        for column in (0, 1, 9):
            assert charts.instance_at(cells, row, column) == at(heat, row, column)
    assert charts.instance_at(cells, "model-05", 0) == "model-05-8"
    assert charts.instance_at(cells, "model-05", 1) == "model-05-3"
    assert charts.instance_at(cells, "model-05", 10) is None and charts.instance_at(cells, "model-05 ·2", 0) is None


def test_two_big_models_get_the_widest_rows_that_fit_the_page() -> None:
    cells = fleet(2, 100, {"model-01-77": "red"})
    heat, layout = heatmap(cells)
    assert len(heat["z"][0]) == big_fleet.WIDE_COLUMNS
    assert heat["y"] == ["model-00", "model-00 ·2", "model-00 ·3", "model-00 ·4",
                         "model-01", "model-01 ·2", "model-01 ·3", "model-01 ·4"]
    assert layout["height"] <= SCREEN_PX and at(heat, "model-01", 0) == "model-01-77"
    assert heat["text"][4][0] == ""  # 25 tiles a row are too narrow for a name


def test_too_many_rows_keep_those_with_an_instance_not_green_and_count_the_rest() -> None:
    cells = fleet(200, 1, {"model-42-0": "red", "model-07-0": "grey"})
    heat, layout = heatmap(cells)
    assert heat["y"] == ["model-07", "model-42"] and layout["height"] <= SCREEN_PX
    assert at(heat, "model-42", 0) == "model-42-0" and charts.instance_at(cells, "model-42", 0) == "model-42-0"
    shape = big_fleet.grid_layout(cells)
    assert (shape.left_out, shape.left_unhealthy) == (198, 0)
    assert big_fleet.grid_caption(shape, len(cells)) == (
        "200 instances, 8 tiles a row, each model's worst first (red, yellow, grey, then green); hover a tile for "
        "its metrics, click it to open the instance. Drawn: the 2 rows with an instance not green; 198 instances, "
        "every one green, are left to the table below.")


def test_more_unwell_rows_than_a_screen_keep_the_worst_in_model_order() -> None:
    unwell = {f"model-{m:02d}-0": "yellow" for m in range(25)} | {"model-30-0": "red", "model-31-0": "red"}
    cells = fleet(40, 1, unwell)
    shape = big_fleet.grid_layout(cells)
    labels = [label for label, _ in shape.rows]
    assert len(labels) == big_fleet.GRID_ROWS and labels == sorted(labels)
    assert {"model-30", "model-31"} <= set(labels) and labels[:18] == [f"model-{m:02d}" for m in range(18)]
    assert (shape.left_out, shape.left_unhealthy) == (20, 7)
    _, layout = heatmap(cells)
    assert layout["height"] <= SCREEN_PX
    assert "Drawn: the 20 rows with the worst tiles; 20 instances (7 of them not green)" in str(
        big_fleet.grid_caption(shape, len(cells)))


def test_an_all_green_fleet_too_big_for_a_screen_draws_nothing_and_says_so() -> None:
    cells = fleet(30, 1)
    shape = big_fleet.grid_layout(cells)
    assert shape.rows == [] and not charts.health_grid_chart(cells).data
    assert big_fleet.grid_caption(shape, len(cells)) == (
        "All 30 instances green (no row to draw): the table below lists each one.")
