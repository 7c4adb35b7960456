"""What a picture of a big fleet draws: the rows worth a look, and how many it leaves to the table beside it.

A chart with one row per candidate or per instance is read at a glance with a handful of rows;
with a platform team's 200 instances it was 8,000 px of identical bars ("Why this model": 200
candidates' stacked score terms) or 7,000 px of green cells ("Latches now"). Each function keeps
the rows that answer the page's question (the best-scored and the chosen; the instances held
out or stale; the latches out longest) and says how many it left out: the tables under the
charts keep every row. The Fleet page's health grid (a row per model, a tile per instance) was
40 rows, 2,900 px, at 200 instances: past a dozen rows it lays each model out wider, ranks its
worst tiles first and keeps at most :data:`GRID_ROWS` rows (:func:`grid_layout`). Pure: frames in,
frames out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from app.units import count

__all__ = [
    "CHART_CANDIDATES", "CHART_ROWS", "CLASSIC_ROWS", "GRID_COLUMNS", "GRID_ROWS", "TILE_RANK", "WIDE_COLUMNS",
    "GridLayout", "grid_caption", "grid_layout", "latches_to_draw", "longest_out", "top_scored",
]

CHART_CANDIDATES = 20  # candidates the score-terms chart draws (the chosen one always among them)
CHART_ROWS = 40  # instances or latch rows a fleet chart draws before it keeps only those worth a look
GRID_COLUMNS = 8  # tiles a grid row holds at the demo's sizes, each naming its instance and value
CLASSIC_ROWS = 12  # a grid of up to this many 8-tile rows is drawn so (every fleet of 12 instances or fewer)
WIDE_COLUMNS = 25  # tiles a row at most: ~30 px each beside the open sidebar in a 1280 px window
GRID_ROWS = 20  # rows a wide grid keeps (about a screen at 28 px a row), the rows with an instance not green
TILE_RANK = {"red": 0, "yellow": 1, "grey": 2, "green": 3}  # worst first: a tile's order within its model

Row = tuple[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class GridLayout:
    """Where the health grid puts each instance, and what it leaves to the table beside it.

    Attributes:
        rows: Top to bottom: a label (the model, ``model ·2`` when wrapped) and its cells, left to right.
        columns: Tiles a row holds.
        dense: Laid out for a big fleet: wider rows, each model's worst tiles first, no text in them.
        left_out: Instances in no row drawn.
        left_unhealthy: Of those, how many are not green.
    """

    rows: list[Row]
    columns: int
    dense: bool
    left_out: int = 0
    left_unhealthy: int = 0


def _wrap(cells: pd.DataFrame, columns: int, worst_first: bool) -> list[Row]:
    out: list[Row] = []
    for model, group in cells.groupby("model", sort=True):
        if worst_first:
            group = group.iloc[group["status"].map(TILE_RANK).fillna(len(TILE_RANK)).argsort(kind="stable")]
        recs = [{str(k): v for k, v in r.items()} for r in group.to_dict("records")]
        for part in range(math.ceil(len(recs) / columns)):
            out.append((str(model) if part == 0 else f"{model} ·{part + 1}",
                        recs[part * columns:(part + 1) * columns]))
    return out


def _worst(row: Row) -> int:
    return min(TILE_RANK.get(str(r["status"]), len(TILE_RANK)) for r in row[1])


def grid_layout(cells: pd.DataFrame, n: int = GRID_ROWS) -> GridLayout:
    """The health grid's rows for ``cells`` (rows of :func:`app.ui.data.fleet.cells`, by model and instance).

    Up to :data:`CLASSIC_ROWS` rows of :data:`GRID_COLUMNS` tiles, the grid is drawn as it always was
    (each model's instances in name order). A bigger fleet gets rows as wide as its biggest model
    (:data:`GRID_COLUMNS` to :data:`WIDE_COLUMNS` tiles), each model's tiles worst first (red,
    yellow, grey, green), so a red tile opens its model's row. When that is still more than ``n``
    rows, only the rows with a tile not green are kept (the ``n`` worst when more, in model
    order); the rest are counted in ``left_out``.
    """
    classic = _wrap(cells, GRID_COLUMNS, worst_first=False)
    if len(classic) <= CLASSIC_ROWS:
        return GridLayout(classic, GRID_COLUMNS, dense=False)
    columns = min(WIDE_COLUMNS, max(GRID_COLUMNS, int(cells.groupby("model").size().max())))
    rows = _wrap(cells, columns, worst_first=True)
    if len(rows) <= n:
        return GridLayout(rows, columns, dense=True)
    flagged = sorted((i for i, row in enumerate(rows) if _worst(row) < TILE_RANK["green"]),
                     key=lambda i: _worst(rows[i]))[:n]
    kept = [rows[i] for i in sorted(flagged)]
    drawn = {str(r["instance"]) for _, recs in kept for r in recs}
    left = cells[~cells["instance"].astype(str).isin(drawn)]
    return GridLayout(kept, columns, dense=True, left_out=len(left),
                      left_unhealthy=int((left["status"] != "green").sum()))


def top_scored(terms: pd.DataFrame, keep: Iterable[str | None] = (),
               n: int = CHART_CANDIDATES) -> tuple[pd.DataFrame, int]:
    """The score-term rows of the ``n`` best candidates (``terms`` is best first) and of those in ``keep``.

    Returns:
        The rows kept, in their order, and how many candidates were left out.
    """
    order = list(dict.fromkeys(terms["instance"]))
    shown = set(order[:n]) | {k for k in keep if k is not None and k in order}
    return terms[terms["instance"].isin(shown)], len(order) - len(shown)


def latches_to_draw(rows: pd.DataFrame, n: int = CHART_ROWS) -> tuple[pd.DataFrame, int]:
    """The latch rows of instances worth drawing: all of them up to ``n`` instances, else those out or stale.

    Returns:
        The rows kept (by instance, as given) and how many instances, every latch in and fresh, were left out.
    """
    instances = rows["instance"].nunique()
    if instances <= n:
        return rows, 0
    flagged = set(rows.loc[(rows["state"] == "out") | rows["stale"].astype(bool), "instance"])
    kept = rows[rows["instance"].isin(flagged)]
    return kept, instances - len(flagged)


def longest_out(intervals: pd.DataFrame, n: int = CHART_ROWS) -> tuple[pd.DataFrame, int]:
    """The intervals of the ``n`` (instance, constraint) rows out longest over the window, all when fewer.

    Returns:
        The intervals kept and how many rows were left out.
    """
    keys = intervals["instance"] + "\x00" + intervals["constraint"]
    total = intervals.groupby(keys)["duration_s"].sum()
    if len(total) <= n:
        return intervals, 0
    longest = set(total.sort_values(ascending=False, kind="stable").index[:n])
    return intervals[keys.isin(longest)], len(total) - n


def grid_caption(layout: GridLayout, total: int) -> str | None:
    """How a dense grid of ``total`` instances reads, and what it left to the table; None for the demo's grid."""
    if not layout.dense:
        return None
    text = (f"{count(total, 'instance')}, {layout.columns} tiles a row, each model's worst first (red, yellow, "
            "grey, then green); hover a tile for its metrics, click it to open the instance.")
    if not layout.rows:
        return f"All {count(total, 'instance')} green (no row to draw): the table below lists each one."
    if layout.left_out and layout.left_unhealthy:
        text += (f" Drawn: the {count(len(layout.rows), 'row')} with the worst tiles; "
                 f"{count(layout.left_out, 'instance')} ({layout.left_unhealthy:,} of them not green) are left to "
                 "the table below.")
    elif layout.left_out:
        text += (f" Drawn: the {count(len(layout.rows), 'row')} with an instance not green; "
                 f"{count(layout.left_out, 'instance')}, every one green, are left to the table below.")
    return text
