"""Lines and bars over time buckets that show their gaps and their still-filling last bucket.

Shared by the Overview and Experiments charts: a frame from :func:`app.ui.timeseries.complete`
(every bucket of the window, ``partial`` marked) becomes a solid line over whole buckets, a dotted
stub into the partial one, and a shaded band labelled "filling" over it.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import plotly.graph_objects as go

from app.ui.timeseries import partial_span, x_range

__all__ = ["PARTIAL_NOTE", "bars", "line", "mark_partial"]

PARTIAL_NOTE = "filling"


def _marked(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``partial`` column (all False when it was not completed over a window)."""
    return frame.reset_index(drop=True) if "partial" in frame else frame.reset_index(drop=True).assign(partial=False)


def line(fig: go.Figure, frame: pd.DataFrame, column: str, name: str, colour: str, *, row: int,
         legendgroup: str | None = None, showlegend: bool = True, key: str = "start") -> None:
    """``column`` as a line over whole buckets (broken at empty ones) and a dotted stub into a partial last one."""
    frame = _marked(frame)
    filling = len(frame) > 0 and bool(frame["partial"].iloc[-1])
    whole = frame[column].astype("float64").copy()
    if filling:
        whole.iloc[-1] = float("nan")
    fig.add_trace(go.Scatter(x=frame[key], y=whole, name=name, mode="lines+markers", line={"color": colour},
                             marker={"size": 4}, connectgaps=False, legendgroup=legendgroup or name,
                             showlegend=showlegend), row=row, col=1)
    if filling:
        tail = frame.iloc[-2:]
        fig.add_trace(go.Scatter(x=tail[key], y=tail[column], name=f"{name} ({PARTIAL_NOTE})", mode="lines+markers",
                                 line={"color": colour, "dash": "dot"},
                                 marker={"size": 7, "symbol": "circle-open"}, connectgaps=False,
                                 legendgroup=legendgroup or name, showlegend=False,
                                 hovertemplate="%{y} so far (bucket still filling)<extra></extra>"), row=row, col=1)


def bars(fig: go.Figure, frame: pd.DataFrame, column: str, name: str, colour: str, *, row: int,
         key: str = "start") -> None:
    """``column`` as bars; the partial last bucket's bar is pale and hatched."""
    frame = _marked(frame)
    partial = frame["partial"] & (frame.index == len(frame) - 1)
    fig.add_trace(go.Bar(
        x=frame[key], y=frame[column], name=name,
        marker={"color": colour, "opacity": [0.35 if p else 1.0 for p in partial],
                "pattern": {"shape": ["/" if p else "" for p in partial]}},
        customdata=[" (bucket still filling)" if p else "" for p in partial],
        hovertemplate="%{x}: %{y}%{customdata}<extra></extra>"), row=row, col=1)


def mark_partial(fig: go.Figure, frame: pd.DataFrame, bucket: str, start: datetime, end: datetime) -> None:
    """Shade the still-filling last bucket, label it, and fix the x axis to the window."""
    span = partial_span(_marked(frame), bucket, end)
    if span is not None:
        fig.add_vrect(x0=span[0], x1=end, fillcolor="#999999", opacity=0.12, line_width=0,
                      annotation_text=PARTIAL_NOTE, annotation_position="top left",
                      annotation_font={"size": 10, "color": "#666666"})
    fig.update_xaxes(range=x_range(start, end, bucket), type="date")
