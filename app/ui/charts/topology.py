"""Traffic topology picture: the rule → model → instance Sankey, fallback and rejected flows coloured apart.

Nodes are placed here, not by plotly (``arrangement="fixed"``): columns rule | model and constraint |
instance, each column's nodes stacked with the scale plotly itself uses (the tightest column fills
the height). Knowing where every node and link sits, each flow wide enough to hold a number gets its
count written on it, and every node carries its count in its label, in dark text on a white ground.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

__all__ = ["FLOW_COLOURS", "NODE_COLOURS", "TEXT_COLOUR", "Placement", "place", "sankey_chart"]

# Links are translucent so crossing flows stay readable; nodes solid, one colour per column.
FLOW_COLOURS: dict[str, str] = {
    "served": "rgba(76,120,168,0.45)", "fallback": "rgba(240,162,2,0.75)", "rejected": "rgba(214,39,40,0.55)",
}
NODE_COLOURS: dict[str, str] = {
    "rule": "#6c757d", "model": "#4c78a8", "instance": "#2e9e44", "constraint": "#d62728",
}
TEXT_COLOUR = "#1a1a1a"
COLUMN_X: dict[str, float] = {"rule": 0.001, "model": 0.5, "constraint": 0.5, "instance": 0.999}
PAD_PX, THICKNESS_PX, MIN_LABEL_PX = 14, 16, 12
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


@dataclass(frozen=True)
class Placement:
    """Where the nodes sit (``x``, ``y``: centres, 0-1 of the plot, y down) and each link's middle (``mid_y``)."""

    x: list[float]
    y: list[float]
    mid_y: list[float]
    widths_px: list[float]


def place(nodes: pd.DataFrame, links: pd.DataFrame, height_px: float) -> Placement:
    """Stack each column's nodes top-down and find each link's vertical middle, as plotly's Sankey draws them.

    A node is as tall as the larger of what enters and leaves it, times one scale for the whole
    figure (the tightest column fills ``height_px``, pads included: d3-sankey's ``ky``). A node's
    links leave it stacked in the order of their targets' heights, and enter in the order of their
    sources' (d3-sankey's link sort), so the middle of a link is halfway between its two slots.
    """
    n = len(nodes)
    ins, outs = [0.0] * n, [0.0] * n
    for s, t, v in zip(links["source"], links["target"], links["value"], strict=True):
        outs[int(s)] += float(v)
        ins[int(t)] += float(v)
    value = [max(a, b) for a, b in zip(ins, outs, strict=True)]
    columns: dict[float, list[int]] = defaultdict(list)
    xs = [COLUMN_X[str(k)] for k in nodes["kind"]]
    for i, x in enumerate(xs):
        columns[x].append(i)
    ky = min((height_px - PAD_PX * (len(ids) - 1)) / max(sum(value[i] for i in ids), 1e-9)
             for ids in columns.values())
    top = [0.0] * n
    for ids in columns.values():
        used = sum(value[i] for i in ids) * ky + PAD_PX * (len(ids) - 1)
        y = max((height_px - used) / 2, 0.0)  # the column centred
        for i in ids:
            top[i] = y
            y += value[i] * ky + PAD_PX
    ys = [(top[i] + value[i] * ky / 2) / height_px for i in range(n)]
    order = sorted(range(len(links)), key=lambda k: (top[int(links["target"].iloc[k])], k))
    out_at, in_at = list(top), list(top)
    start_out, start_in = [0.0] * len(links), [0.0] * len(links)
    for k in order:
        s = int(links["source"].iloc[k])
        start_out[k] = out_at[s]
        out_at[s] += float(links["value"].iloc[k]) * ky
    for k in sorted(range(len(links)), key=lambda k: (top[int(links["source"].iloc[k])], k)):
        t = int(links["target"].iloc[k])
        start_in[k] = in_at[t]
        in_at[t] += float(links["value"].iloc[k]) * ky
    widths = [float(v) * ky for v in links["value"]]
    mid = [((start_out[k] + start_in[k]) / 2 + widths[k] / 2) / height_px for k in range(len(links))]
    return Placement(xs, ys, mid, widths)


def sankey_chart(nodes: pd.DataFrame, links: pd.DataFrame, title: str = "Traffic") -> go.Figure:
    """Draw the frames of :func:`app.ui.data.topology.sankey_frames` as one Sankey, counts on nodes and flows.

    Args:
        nodes: Node rows (kind, name, label with its count, requests, share).
        links: Link rows (source, target, flow, value, shares, names).
        title: The figure title.

    Returns:
        One ``sankey`` trace: nodes coloured by :data:`NODE_COLOURS` (their kind) at fixed places,
        labelled in :data:`TEXT_COLOUR`; links coloured by :data:`FLOW_COLOURS` (their flow), hover
        texts with counts and shares; an annotation with its count on each link at least
        :data:`MIN_LABEL_PX` wide. Empty (no traces) without links.
    """
    fig = go.Figure()
    if links.empty:
        return fig
    height = max(360, 34 * int(nodes["kind"].value_counts().max()) + 80)
    plot_px = height - _MARGIN["t"] - _MARGIN["b"]
    where = place(nodes, links, plot_px)
    fig.add_trace(go.Sankey(
        arrangement="fixed", textfont={"color": TEXT_COLOUR, "size": 12},
        node={
            "label": nodes["label"].tolist(), "pad": PAD_PX, "thickness": THICKNESS_PX,
            "color": [NODE_COLOURS[k] for k in nodes["kind"]], "x": where.x, "y": where.y,
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
    for k, (s, t, v) in enumerate(zip(links["source"], links["target"], links["value"], strict=True)):
        if where.widths_px[k] < MIN_LABEL_PX:
            continue
        x = (where.x[int(s)] + where.x[int(t)]) / 2
        fig.add_annotation(x=x, y=1 - where.mid_y[k], xref="paper", yref="paper", showarrow=False,
                           text=f"{int(v):,}", font={"size": 11, "color": TEXT_COLOUR},
                           bgcolor="rgba(255,255,255,0.85)", borderpad=1)
    fig.update_layout(title=title, height=height, margin=_MARGIN, font={"size": 12, "color": TEXT_COLOUR},
                      paper_bgcolor="#ffffff", plot_bgcolor="#ffffff")
    return fig
