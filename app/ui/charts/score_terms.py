"""Why the winner won: each candidate's score as stacked weighted terms."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["score_terms_chart"]


def score_terms_chart(frame: pd.DataFrame) -> go.Figure:
    """Stack each candidate's weighted score terms into one horizontal bar, best candidate on top.

    A bar's length is the sum of its weighted terms (the total before any soft-constraint ramp);
    hovering a segment shows ``raw × weight = weighted``.

    Args:
        frame: Rows of :func:`app.ui.data.trace_tables.score_terms_frame` (instance, term, raw,
            weight, weighted), candidates best first.

    Returns:
        One bar trace per term; empty (no traces) when no candidate was scored.
    """
    instances = list(dict.fromkeys(frame["instance"]))
    fig = go.Figure()
    for term, rows in frame.groupby("term", sort=False):
        fig.add_trace(
            go.Bar(
                name=str(term),
                y=rows["instance"],
                x=rows["weighted"],
                orientation="h",
                customdata=rows[["raw", "weight"]].to_numpy(),
                hovertemplate=f"%{{y}}<br>{term}: %{{customdata[0]:.3f}} × %{{customdata[1]:.3f}}"
                "  = %{x:.3f}<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        xaxis_title="weighted score",
        yaxis={"categoryorder": "array", "categoryarray": instances[::-1], "title": None},
        legend_title_text="term",
        height=120 + 40 * len(instances),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
    )
    return fig
