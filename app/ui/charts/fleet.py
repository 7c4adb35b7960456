"""Fleet pictures: the health grid (a row per model, a cell per instance) and one instance's metrics over time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.ui.data.big_fleet import GRID_COLUMNS, grid_layout
from app.ui.data.fleet import METRICS, SHORT, STATUSES
from app.ui.limits import Limits
from app.units import METRIC_NAMES, fmt, metric_unit

__all__ = [
    "DENSE_ROW_PX", "MAX_COLUMNS", "NAMED_COLUMNS", "ROW_PX", "STATUS_COLOURS", "grid_rows", "health_grid_chart",
    "instance_at", "instance_metrics_chart",
]

STATUS_COLOURS: dict[str, str] = {"green": "#2e9e44", "yellow": "#f0a202", "red": "#d62728", "grey": "#b0b0b0"}
MAX_COLUMNS = GRID_COLUMNS  # tiles a row at the demo's sizes; a big fleet's rows are wider (big_fleet.grid_layout)
NAMED_COLUMNS = 12  # a dense row of up to this many tiles (60 px or more each) names its instances not green
ROW_PX, DENSE_ROW_PX = 70, 28  # a row's height: tiles with two lines of text; a dense row's bare tiles
_CODES = {status: code for code, status in enumerate(STATUSES)}
_MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}
_TITLES = {"kv_cache_usage": "KV-cache usage (%)", "queue": "queue (requests waiting)", "error_rate": "error rate (%)",
           "ttft_p95_ms": "p95 TTFT (ms)"}
_AXIS = {"%": {"tickformat": ".0%"}, "ms": {"ticksuffix": " ms"}}


def _scale() -> list[list[float | str]]:
    n = len(STATUSES)
    scale: list[list[float | str]] = []
    for code, status in enumerate(STATUSES):
        scale += [[code / n, STATUS_COLOURS[status]], [(code + 1) / n, STATUS_COLOURS[status]]]
    return scale


def _hover(row: dict[str, Any]) -> str:
    parts = [f"<b>{row['instance']}</b> ({row['model']}): {row['status']}"]
    for metric in METRICS:
        text = row.get(f"{metric}_text")
        parts.append(f"{SHORT[metric]}: {text if isinstance(text, str) else '—'}")
    age = row.get("age_s")
    if age is not None and not pd.isna(age):
        parts.append(f"state age {fmt(float(age), 's')}")
    if row.get("latched"):
        parts.append(f"latched out: {row['latched']}")
    return "<br>".join(parts)


def grid_rows(cells: pd.DataFrame) -> list[tuple[str, list[dict[str, Any]]]]:
    """The grid's rows, top to bottom: a label (the model, ``model ·2`` when wrapped) and its cells, left to right.

    As :func:`app.ui.data.big_fleet.grid_layout` lays them out (a big fleet's rows wider, worst first, trimmed).
    """
    return grid_layout(cells).rows


def instance_at(cells: pd.DataFrame, row: str, column: int) -> str | None:
    """The instance of the grid cell at ``(row label, column)`` (a click's ``y``, ``x``), None if empty."""
    for label, chunk in grid_rows(cells):
        if label == row and 0 <= column < len(chunk):
            return str(chunk[column]["instance"])
    return None


def _tile_text(r: dict[str, Any], dense: bool, columns: int) -> str:
    if not dense:
        return f"{r['instance']}<br>{r['label']}"
    # A dense tile is too small for its value; a wide enough one names an instance that needs a look.
    return str(r["instance"]) if r["status"] != "green" and columns <= NAMED_COLUMNS else ""


def health_grid_chart(cells: pd.DataFrame, title: str = "Fleet health") -> go.Figure:
    """Colour each (model, instance) cell by its status; the cell names the instance and its worst metric.

    Args:
        cells: Rows of :func:`app.ui.data.fleet.cells`.
        title: The figure's title (e.g. the moment shown).

    Returns:
        One heatmap, a row per model: :data:`MAX_COLUMNS` tiles a row (70 px high, each naming its
        instance and value) at the demo's sizes; a big fleet's rows wider (up to
        :data:`~app.ui.data.big_fleet.WIDE_COLUMNS` tiles), 28 px high, each model's worst tiles
        first, at most :data:`~app.ui.data.big_fleet.GRID_ROWS` rows (see
        :func:`app.ui.data.big_fleet.grid_layout`). The hover lists every metric; ``customdata``
        carries the instance id. Empty for an empty frame or when no row is kept.
    """
    fig = go.Figure()
    layout = grid_layout(cells)
    if not layout.rows:
        return fig
    columns, dense = layout.columns, layout.dense
    rows: list[str] = []
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    hover: list[list[str]] = []
    ids: list[list[str | None]] = []
    for label, chunk in layout.rows:
        pad = columns - len(chunk)
        rows.append(label)
        z.append([float(_CODES[r["status"]]) for r in chunk] + [None] * pad)
        text.append([_tile_text(r, dense, columns) for r in chunk] + [""] * pad)
        hover.append([_hover(r) for r in chunk] + [""] * pad)
        ids.append([str(r["instance"]) for r in chunk] + [None] * pad)
    width = min(columns, max(len(chunk) for _, chunk in layout.rows))
    gap = 2 if dense else 4
    fig.add_trace(go.Heatmap(
        z=[row[:width] for row in z], y=rows, x=list(range(width)), text=[row[:width] for row in text],
        customdata=[[[h, i] for h, i in zip(hr[:width], ir[:width], strict=True)] for hr, ir in zip(hover, ids,
                                                                                                  strict=True)],
        texttemplate="%{text}", textfont={"size": 10} if dense else None, colorscale=_scale(), zmin=-0.5,
        zmax=len(STATUSES) - 0.5, showscale=False, xgap=gap, ygap=gap, hovertemplate="%{customdata[0]}<extra></extra>",
    ))
    fig.update_layout(title=title, height=100 + (DENSE_ROW_PX if dense else ROW_PX) * len(rows), margin=_MARGIN,
                      yaxis={"autorange": "reversed", "title": None, "type": "category"},
                      xaxis={"visible": False, "range": [-0.5, width - 0.5]})
    return fig


def instance_metrics_chart(
    series: pd.DataFrame, limits: Limits, instance: str, transitions: pd.DataFrame | None = None,
    model: str | None = None, span: tuple[datetime, datetime] | None = None,
) -> go.Figure:
    """One instance's KV-cache, queue, error rate and p95 TTFT over time, each with its limit's lines.

    Args:
        series: Rows of :func:`app.ui.data.fleet.instance_series`.
        limits: The running configuration's limits: the threshold a red dashed line, the warning
            bound (soft threshold or re-entry bound) a yellow one, each labelled with its source.
        instance: Named in the title.
        model: The instance's model (a constraint may apply to some models only).
        transitions: Rows of :func:`app.ui.data.fleet.latch_transitions`: latch changes become vertical lines.
        span: The window shown: the x axis runs over all of it (a stretch without data stays empty).
    """
    fig = make_subplots(rows=len(METRICS), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[_TITLES[m] for m in METRICS])
    for i, metric in enumerate(METRICS, start=1):
        unit = metric_unit(metric)
        fig.add_trace(go.Scatter(x=series["ts"], y=series[metric], name=METRIC_NAMES[metric], mode="lines+markers",
                                 marker={"size": 4}, line={"color": "#1f77b4"}, showlegend=False,
                                 connectgaps=False, text=[fmt(v, unit) for v in series[metric]],
                                 hovertemplate="%{x}<br>%{text}<extra></extra>"), row=i, col=1)
        lim = limits.limit(metric, model, instance)
        if lim is not None:
            for status, bound in (("red", lim.threshold), ("yellow", lim.warn)):
                if bound is None:
                    continue
                note = f"{lim.source} {fmt(bound, unit)}" if status == "red" else fmt(bound, unit)
                fig.add_hline(y=bound, line={"color": STATUS_COLOURS[status], "dash": "dash", "width": 1},
                              annotation_text=note, annotation_position="top left",
                              annotation_font={"size": 10, "color": STATUS_COLOURS[status]}, row=i, col=1)
        fig.update_yaxes(title=None, rangemode="tozero", **_AXIS.get(unit, {}), row=i, col=1)
    latch: list[dict[str, Any]] = []
    if transitions is not None and not transitions.empty:
        latch = [{str(k): v for k, v in r.items()}
                 for r in transitions[transitions["source"] == "latch"].to_dict("records")]
    for t in latch:
        colour = STATUS_COLOURS["red"] if str(t["what"]).endswith(" out") else STATUS_COLOURS["green"]
        fig.add_vline(x=t["ts"], line={"color": colour, "width": 1, "dash": "dot"})
    if span is not None:  # as the data's times read: UTC without an offset (plotly.js has no time zones)
        fig.update_xaxes(range=[t.astimezone(UTC).replace(tzinfo=None) for t in span])
    fig.update_layout(title=f"{instance} over the window", height=160 * len(METRICS) + 60, margin=_MARGIN)
    return fig
