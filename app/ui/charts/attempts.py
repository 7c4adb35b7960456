"""The forwarding attempts of one request on a timeline (attempts run one after another)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["STATUS_COLOURS", "attempts_chart"]

STATUS_COLOURS: dict[str, str] = {
    "ok": "#2ca02c", "timeout": "#ff7f0e", "http_error": "#d62728", "connect_error": "#9467bd",
}


def attempts_chart(frame: pd.DataFrame) -> go.Figure:
    """Horizontal bars, one per attempt, starting where the previous ended, coloured by status.

    Args:
        frame: :func:`app.ui.data.trace_tables.attempts_frame` rows (seq, instance, status, latency_ms...).
    """
    ordered = frame.sort_values("seq")
    starts = ordered["latency_ms"].cumsum() - ordered["latency_ms"]
    fig = go.Figure()
    for status, rows in ordered.assign(start=starts).groupby("status", sort=False):
        fig.add_trace(go.Bar(
            name=str(status), orientation="h", base=rows["start"], x=rows["latency_ms"],
            y=[f"#{s} {i}" for s, i in zip(rows["seq"], rows["instance"], strict=True)],
            marker_color=STATUS_COLOURS.get(str(status), "#7f7f7f"),
            customdata=rows[["http_status", "error_class"]].astype(object).fillna("—").to_numpy(),
            hovertemplate="%{y}: %{x:.0f} ms<br>HTTP %{customdata[0]} %{customdata[1]}<extra></extra>",
        ))
    labels = [f"#{s} {i}" for s, i in zip(ordered["seq"], ordered["instance"], strict=True)]
    fig.update_layout(barmode="overlay", xaxis_title="ms since the first attempt", legend_title_text="status",
                      yaxis={"categoryorder": "array", "categoryarray": labels[::-1], "title": None},
                      height=100 + 40 * len(labels), margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return fig
