"""Overview pictures: traffic, error and fallback rates, latency quantiles and cost per time bucket."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.ui.charts.series import bars, line, mark_partial
from app.ui.timeseries import bucket_label

__all__ = ["SERIES_COLOURS", "busiest_chart", "overview_chart"]

SERIES_COLOURS: dict[str, str] = {
    "requests": "#1f77b4", "error_rate": "#d62728", "fallback_rate": "#f0a202",
    "latency_p50_ms": "#9ecae1", "latency_p95_ms": "#3182bd", "latency_p99_ms": "#08519c", "cost": "#2e9e44",
}
# (row, column in the frame, trace name)
_PANELS: tuple[tuple[int, str, str], ...] = (
    (1, "requests", "requests"),
    (2, "error_rate", "error rate"), (2, "fallback_rate", "fallback rate"),
    (3, "latency_p50_ms", "p50"), (3, "latency_p95_ms", "p95"), (3, "latency_p99_ms", "p99"),
    (4, "cost", "cost"),
)
_MARGIN = {"l": 10, "r": 10, "t": 60, "b": 10}
_LEGEND = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1}


def overview_chart(frame: pd.DataFrame, bucket: str, start: datetime, end: datetime,
                   cost_unit: str = "cost units") -> go.Figure:
    """Four panels sharing the time axis: requests (bars), error and fallback rate, latency p50/p95/p99, cost.

    Args:
        frame: Rows of :func:`app.ui.data.overview.series` over the whole window (``partial`` marked).
        bucket: The bucket width, named in the title (``1m``, ``1h``, ...).
        start: The window's start (the x axis begins at its bucket).
        end: The window's end (the x axis ends there).
        cost_unit: The cost panel's unit.

    Returns:
        Seven named traces (requests, error rate, fallback rate, p50, p95, p99, cost), lines broken
        at empty buckets, plus a dotted stub per line into a still-filling last bucket, which is shaded.
    """
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.05,
                        subplot_titles=["requests", "error / fallback rate (%)", "latency (ms)",
                                        f"cost ({cost_unit})"])
    for row, column, name in _PANELS:
        if column == "requests":
            bars(fig, frame, column, name, SERIES_COLOURS[column], row=row)
        else:
            line(fig, frame, column, name, SERIES_COLOURS[column], row=row)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(tickformat=".1%", row=2, col=1)
    fig.update_yaxes(ticksuffix=" ms", row=3, col=1)
    mark_partial(fig, frame, bucket, start, end)
    fig.update_layout(title=f"Per {bucket_label(bucket)} bucket", height=720, margin=_MARGIN, legend=_LEGEND)
    return fig


def busiest_chart(table: pd.DataFrame, by: str) -> go.Figure:
    """Horizontal bars of :func:`app.ui.data.overview.busiest` (busiest on top), each labelled ``count (share)``."""
    fig = go.Figure(go.Bar(x=table["requests"], y=table[by], orientation="h", marker={"color": "#3182bd"},
                           text=[f"{n:,} ({s:.0%})" for n, s in zip(table["requests"], table["share"], strict=True)],
                           textposition="auto", name=by))
    fig.update_layout(title=f"Busiest {by}s", height=80 + 32 * max(len(table), 1), margin=_MARGIN,
                      yaxis={"autorange": "reversed", "title": None}, xaxis={"title": "requests"})
    return fig
