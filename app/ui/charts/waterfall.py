"""The elimination waterfall: how the candidate set shrank, stage by stage."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["REMOVED_COLOUR", "TOTAL_COLOUR", "waterfall_chart"]

REMOVED_COLOUR = "#d62728"
TOTAL_COLOUR = "#1f77b4"


def waterfall_chart(frame: pd.DataFrame) -> go.Figure:
    """One plotly Waterfall trace over :func:`app.ui.data.waterfall.waterfall_stages`.

    Absolute stages (all candidates, ranked, selected) are blue totals; each filter is a red drop
    labelled with the instances it removed; hovering shows the constraint, value and threshold.
    """
    labels = [f"−{-int(c)}: {r}" if m == "relative" and c else ("" if m == "relative" else str(int(c)))
              for m, c, r in zip(frame["measure"], frame["change"], frame["removed"], strict=True)]
    fig = go.Figure(go.Waterfall(
        x=frame["stage"], y=frame["change"], measure=frame["measure"], text=labels, textposition="outside",
        hovertext=frame["detail"], hovertemplate="%{x}<br>%{hovertext}<extra></extra>",
        decreasing={"marker": {"color": REMOVED_COLOUR}}, increasing={"marker": {"color": TOTAL_COLOUR}},
        totals={"marker": {"color": TOTAL_COLOUR}}, connector={"line": {"color": "#888", "dash": "dot"}},
    ))
    fig.update_layout(yaxis_title="candidates", showlegend=False, height=320,
                      margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return fig
