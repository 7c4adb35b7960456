"""The elimination waterfall: how the candidate set shrank, stage by stage."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["LEFT_COLOUR", "REMOVED_COLOUR", "TOTAL_COLOUR", "waterfall_chart"]

REMOVED_COLOUR = "#d62728"
TOTAL_COLOUR = "#1f77b4"
LEFT_COLOUR = "rgba(31,119,180,0.25)"


def _label(measure: str, change: int, removed: str, left: int) -> str:
    if measure != "relative":
        return str(change)
    return f"−{-change}: {removed} · {left} left" if change else f"removed none · {left} left"


def waterfall_chart(frame: pd.DataFrame) -> go.Figure:
    """One plotly Waterfall trace over :func:`app.ui.data.waterfall.waterfall_stages`.

    Absolute stages (all candidates, ranked, selected) are blue totals labelled with their count;
    each filter also has a pale column as tall as the candidates it left (a second, ``bar`` trace);
    each filter is a red drop labelled with what it removed and how many are left (``−1: a-1 · 2 left``),
    and a filter that removed nothing says so at the level it left untouched (``removed none · 3 left``),
    never a bar that reads as zero candidates. Hovering shows the constraint, value and threshold.
    """
    labels = [_label(m, int(c), str(r), int(n)) for m, c, r, n in
              zip(frame["measure"], frame["change"], frame["removed"], frame["count"], strict=True)]
    fig = go.Figure(go.Waterfall(
        x=frame["stage"], y=frame["change"], measure=frame["measure"], text=labels, textposition="outside",
        hovertext=frame["detail"], hovertemplate="%{x}<br>%{hovertext}<extra></extra>",
        decreasing={"marker": {"color": REMOVED_COLOUR}}, increasing={"marker": {"color": TOTAL_COLOUR}},
        totals={"marker": {"color": TOTAL_COLOUR}}, connector={"line": {"color": "#888", "dash": "dot"}},
    ))
    # Under each filter, a pale column of the candidates it left: a filter that removed nothing
    # stands as tall as the set it kept instead of an empty slot.
    left = [int(c) if m == "relative" else None for m, c in zip(frame["measure"], frame["count"], strict=True)]
    fig.add_trace(go.Bar(x=frame["stage"], y=left, marker={"color": LEFT_COLOUR}, name="left",
                         hovertemplate="%{x}: %{y} left<extra></extra>"))
    fig.update_layout(barmode="overlay", waterfallmode="overlay", showlegend=False, height=320,
                      yaxis={"title": "candidates", "rangemode": "tozero", "dtick": 1},
                      margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return fig
