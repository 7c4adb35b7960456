"""Traffic topology picture: the rule → model → instance Sankey, fallback and rejected flows coloured apart."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["FLOW_COLOURS", "NODE_COLOURS", "sankey_chart"]

# Links are translucent so crossing flows stay readable; nodes solid, one colour per column.
FLOW_COLOURS: dict[str, str] = {
    "served": "rgba(76,120,168,0.45)", "fallback": "rgba(240,162,2,0.75)", "rejected": "rgba(214,39,40,0.55)",
}
NODE_COLOURS: dict[str, str] = {
    "rule": "#6c757d", "model": "#4c78a8", "instance": "#2e9e44", "constraint": "#d62728",
}
_MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}


def _pct(share: float | None) -> str:
    return "" if share is None or pd.isna(share) else f"{share:.1%}"


def _link_hover(row: pd.Series) -> str:
    if row["flow"] == "rejected":
        return (f"{row['source_name']} removed {row['target_name']} {int(row['value'])}×"
                f"<br>{_pct(row['share_of_source'])} of this constraint's removals")
    what = "fallback requests" if row["flow"] == "fallback" else "requests"
    return (f"{row['source_name']} → {row['target_name']}: {int(row['value'])} {what}"
            f"<br>{_pct(row['share_of_total'])} of all · {_pct(row['share_of_source'])} of {row['source_name']}")


def _node_hover(row: pd.Series) -> str:
    if row["kind"] == "constraint":
        return f"constraint {row['name']}: {int(row['requests'])} removals"
    share = _pct(row["share"])
    return f"{row['kind']} {row['name']}: {int(row['requests'])} requests" + (f" ({share} of all)" if share else "")


def sankey_chart(nodes: pd.DataFrame, links: pd.DataFrame, title: str = "Traffic") -> go.Figure:
    """Draw the frames of :func:`app.ui.data.topology.sankey_frames` as one Sankey.

    Args:
        nodes: Node rows (kind, name, label, requests, share).
        links: Link rows (source, target, flow, value, shares, names).
        title: The figure title.

    Returns:
        One ``sankey`` trace: nodes coloured by :data:`NODE_COLOURS` (their kind), links by
        :data:`FLOW_COLOURS` (their flow), hover texts with counts and shares; empty (no traces)
        without links.
    """
    fig = go.Figure()
    if links.empty:
        return fig
    fig.add_trace(go.Sankey(
        arrangement="snap",
        node={
            "label": nodes["label"].tolist(), "pad": 14, "thickness": 16,
            "color": [NODE_COLOURS[k] for k in nodes["kind"]],
            "customdata": [_node_hover(r) for _, r in nodes.iterrows()],
            "hovertemplate": "%{customdata}<extra></extra>",
        },
        link={
            "source": links["source"].tolist(), "target": links["target"].tolist(),
            "value": links["value"].tolist(), "color": [FLOW_COLOURS[f] for f in links["flow"]],
            "label": links["flow"].tolist(),
            "customdata": [_link_hover(r) for _, r in links.iterrows()],
            "hovertemplate": "%{customdata}<extra></extra>",
        },
    ))
    height = max(320, 28 * int(nodes["kind"].value_counts().max()))
    fig.update_layout(title=title, height=height, margin=_MARGIN, font={"size": 12})
    return fig
