"""Experiments pictures: per-side time series and the live → shadow flip heatmap."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.ui.charts.series import line, mark_partial
from app.ui.timeseries import bucket_label

__all__ = ["SIDE_COLOURS", "flip_heatmap", "series_chart"]

SIDE_COLOURS: tuple[str, str] = ("#1f77b4", "#ff7f0e")
_PANELS: tuple[tuple[str, str], ...] = (
    ("requests", "requests"), ("error_rate", "error rate (%)"), ("latency_p95_ms", "latency p95 (ms)"),
    ("cost", "cost"),
)
_MARGIN = {"l": 10, "r": 10, "t": 60, "b": 10}
_LEGEND = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1}


def series_chart(frame: pd.DataFrame, bucket: str, start: datetime | None = None, end: datetime | None = None,
                 cost_unit: str = "cost units") -> go.Figure:
    """Four panels sharing the time axis, one line per side: requests, error rate, p95 latency, cost.

    Args:
        frame: Rows of :func:`app.ui.data.experiments.series` (each side over every bucket, ``partial`` marked).
        bucket: The bucket width, named in the title.
        start: Where the x axis starts (the first bucket with data, or the window's start).
        end: The window's end.
        cost_unit: The cost panel's unit.

    Returns:
        One trace per (panel, side), named ``"<side> · <panel>"``, broken at empty buckets; a side's
        traces share a colour; a still-filling last bucket is a dotted stub, shaded.
    """
    titles = [f"{title} ({cost_unit})" if column == "cost" else title for column, title in _PANELS]
    fig = make_subplots(rows=len(_PANELS), cols=1, shared_xaxes=True, vertical_spacing=0.05, subplot_titles=titles)
    sides = list(dict.fromkeys(frame["side"]))
    for k, side in enumerate(sides):
        rows = frame[frame["side"] == side].reset_index(drop=True)
        if "partial" not in rows:
            rows = rows.assign(partial=False)
        colour = SIDE_COLOURS[k % len(SIDE_COLOURS)]
        for row, (column, title) in enumerate(_PANELS, start=1):
            line(fig, rows, column, f"{side} · {title}", colour, row=row, legendgroup=side, showlegend=row == 1)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(tickformat=".1%", row=2, col=1)
    fig.update_yaxes(ticksuffix=" ms", row=3, col=1)
    if start is not None and end is not None and sides:
        mark_partial(fig, frame[frame["side"] == sides[0]].reset_index(drop=True), bucket, start, end)
    fig.update_layout(title=f"Per {bucket_label(bucket)} bucket", height=760, margin=_MARGIN, legend=_LEGEND)
    return fig


def flip_heatmap(matrix: pd.DataFrame, title: str = "Live → shadow, by model") -> go.Figure:
    """Requests by live choice (rows) and shadow choice (columns); the diagonal is agreement.

    Args:
        matrix: :func:`app.ui.data.experiments.flip_matrix` (counts).
        title: The figure's title.
    """
    z = matrix.to_numpy().tolist() if not matrix.empty else []
    total = matrix.sum(axis=1).replace(0, 1) if not matrix.empty else pd.Series(dtype=float)
    text = [[f"{v:,} ({v / total.iloc[i]:.0%} of {matrix.index[i]})" for v in row] for i, row in enumerate(z)]
    fig = go.Figure(go.Heatmap(z=z, x=[str(c) for c in matrix.columns], y=[str(i) for i in matrix.index],
                               text=text, texttemplate="%{text}", colorscale="Blues", showscale=False,
                               hovertemplate="live %{y} → shadow %{x}: %{z}<extra></extra>"))
    fig.update_layout(title=title, height=160 + 48 * max(len(matrix.index), 1), margin=_MARGIN,
                      xaxis={"title": "shadow", "side": "bottom"}, yaxis={"title": "live", "autorange": "reversed"})
    return fig
