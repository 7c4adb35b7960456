"""Probe pictures: the verdict grid (instance × kind), similarity and latency against their bounds."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["DENSE_ROWS", "VERDICT_COLOURS", "latency_chart", "shown_verdict", "similarity_chart", "verdict_grid_chart"]

VERDICT_COLOURS: dict[str, str] = {
    "ok": "#2e9e44", "degraded": "#f0a202", "failed": "#d62728", "no data": "#b0b0b0",
}
DENSE_ROWS = 40
_CODES = {verdict: code for code, verdict in enumerate(VERDICT_COLOURS)}
_MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}
# The grid's kinds are labelled above it (a tall fleet's bottom edge is off screen): the top margin
# holds the title, pinned to the figure's top edge, and under it the labels; with the title in the
# middle of a 40 px margin, it was drawn over them.
_GRID_TITLE_PX, _GRID_LABELS_PX = 36, 30
_GRID_MARGIN = {**_MARGIN, "t": _GRID_TITLE_PX + _GRID_LABELS_PX}
# Above the plot, right-aligned: below it, it covers the time axis' date label.
_LEGEND = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1}


def _discrete_scale() -> list[list[float | str]]:
    """A colourscale with one flat band per verdict code 0..n-1; with zmin -0.5, zmax n-0.5 codes land mid-band."""
    n = len(VERDICT_COLOURS)
    scale: list[list[float | str]] = []
    for code, colour in enumerate(VERDICT_COLOURS.values()):
        scale += [[code / n, colour], [(code + 1) / n, colour]]
    return scale


def verdict_grid_chart(grid: pd.DataFrame, order: list[str] | None = None) -> go.Figure:
    """Colour each (instance, kind) cell by its verdict: ok green, degraded amber, failed red, none grey.

    The verdict is the router's (``held``: the hysteresis verdict it routes by) where the frame has
    it, else the last result's: a cured instance is still held out for ``recover_m`` passing probes,
    and a grid of last results showed it green while it was held out and its alert fired.

    Args:
        grid: Rows of :func:`app.ui.data.probes.last_verdicts` (instance, kind, verdict, value, ...).
        order: Instances top to bottom (e.g. worst first); default: the frame's order.

    Returns:
        One heatmap whose cells carry the verdict as text; empty (no traces) for an empty frame.
    """
    fig = go.Figure()
    if grid.empty:
        return fig
    rows = order or list(dict.fromkeys(grid["instance"]))
    kinds = list(dict.fromkeys(grid["kind"]))
    cell = grid.set_index(["instance", "kind"])
    z, text, hover = [], [], []
    for inst in rows:
        z_row, t_row, h_row = [], [], []
        for kind in kinds:
            found = (inst, kind) in cell.index
            verdict = shown_verdict(cell.loc[(inst, kind)]) if found else "no data"
            z_row.append(_CODES.get(verdict, _CODES["no data"]))
            t_row.append(verdict)
            h_row.append(_hover(cell.loc[(inst, kind)]) if found else "")
        z.append(z_row)
        text.append(t_row)
        hover.append(h_row)
    # A big fleet gets thin rows without cell text (the hover still names the verdict).
    dense = len(rows) > DENSE_ROWS
    fig.add_trace(go.Heatmap(
        z=z, x=kinds, y=rows, text=text, customdata=hover, texttemplate="" if dense else "%{text}",
        colorscale=_discrete_scale(), zmin=-0.5, zmax=len(VERDICT_COLOURS) - 0.5, showscale=False, xgap=3, ygap=3,
        hovertemplate="%{y} · %{x}: %{text}%{customdata}<extra></extra>",
    ))
    fig.update_layout(
        title={"text": "Verdict per probe (the router's; else the last result's)", "yref": "container", "y": 1,
               "yanchor": "top", "pad": {"t": 8}},
        height=120 + _GRID_MARGIN["t"] - _MARGIN["t"] + (14 if dense else 36) * len(rows), margin=_GRID_MARGIN,
        yaxis={"autorange": "reversed", "title": None}, xaxis={"side": "top", "title": None, "ticklabelstandoff": 4},
    )
    return fig


def shown_verdict(row: pd.Series) -> str:
    """The verdict a grid cell shows: the router's held one, else the last result's."""
    held = row.get("held")
    return str(held) if isinstance(held, str) and held else str(row["verdict"])


def _hover(row: pd.Series) -> str:
    parts = []
    if pd.notna(row.get("value")):
        limit = row.get("limit")
        parts.append(str(row["reading"]) + (f" ({limit})" if isinstance(limit, str) and limit else ""))
    if row.get("held"):
        parts.append(f"last result: {row['verdict']}")
    if row.get("reason"):
        parts.append(str(row["reason"])[:120])
    return "<br>" + "<br>".join(parts) if parts else ""


def _points(frame: pd.DataFrame, name: str) -> go.Scatter:
    """The measured values, each marker coloured by its verdict against the running configuration."""
    colours = [VERDICT_COLOURS.get(v, VERDICT_COLOURS["no data"]) for v in frame["verdict"]]
    return go.Scatter(
        x=frame["ts"], y=frame["value"], name=name, mode="lines+markers", line={"color": "#4c78a8"},
        marker={"color": colours, "size": 8}, customdata=frame[["verdict", "reading", "reason"]].to_numpy(),
        hovertemplate="%{x}<br>%{customdata[1]} · %{customdata[0]}<br>%{customdata[2]}<extra></extra>",
    )


def similarity_chart(frame: pd.DataFrame, instance: str) -> go.Figure:
    """The semantic probe's lowest cosine similarity over time against its threshold line.

    Args:
        frame: Rows of :func:`app.ui.data.probes.similarity_series`.
        instance: The instance shown, for the title.

    Returns:
        The similarity trace and a dashed ``threshold`` step line; empty (no traces) without rows.
    """
    fig = go.Figure()
    if frame.empty:
        return fig
    fig.add_trace(_points(frame, "similarity"))
    if frame["threshold"].notna().any():
        fig.add_trace(go.Scatter(
            x=frame["ts"], y=frame["threshold"], name="threshold", mode="lines",
            line={"color": VERDICT_COLOURS["failed"], "dash": "dash", "shape": "hv"},
            hovertemplate="threshold %{y:.3f}<extra></extra>",
        ))
    fig.update_layout(
        title=f"Semantic similarity · {instance}", yaxis={"title": "cosine", "range": [0, 1.05]},
        height=320, margin=_MARGIN, legend=_LEGEND,
    )
    return fig


def latency_chart(frame: pd.DataFrame, instance: str) -> go.Figure:
    """The latency probe's window p95 over time against the learned baseline and its ±tolerance band.

    Args:
        frame: Rows of :func:`app.ui.data.probes.latency_series`.
        instance: The instance shown, for the title.

    Returns:
        Band (``band_high`` filled down to ``band_low``, a pair of traces per run of rows with a band:
        one fill across a gap would draw a wedge over it), ``baseline`` and ``p95`` traces; the band
        and baseline are left out while no baseline is learned; empty (no traces) without rows.
    """
    fig = go.Figure()
    if frame.empty:
        return fig
    if frame["baseline"].notna().any():
        for i, run in enumerate(_band_runs(frame)):
            band = {"mode": "lines", "line": {"width": 0, "shape": "hv"}, "hoverinfo": "skip", "legendgroup": "band"}
            fig.add_trace(go.Scatter(x=run["ts"], y=run["band_low"], name="band_low", showlegend=False, **band))
            fig.add_trace(go.Scatter(
                x=run["ts"], y=run["band_high"], name="±tolerance", fill="tonexty", showlegend=i == 0,
                fillcolor="rgba(240,162,2,0.18)", **band,
            ))
        fig.add_trace(go.Scatter(
            x=frame["ts"], y=frame["baseline"], name="baseline", mode="lines",
            line={"color": "#555555", "dash": "dot", "shape": "hv"},
            hovertemplate="baseline %{y:,.0f} ms<extra></extra>",
        ))
    fig.add_trace(_points(frame, "p95"))
    fig.update_layout(
        title=f"Latency p95 · {instance}", yaxis={"title": "ms", "rangemode": "tozero"},
        height=320, margin=_MARGIN, legend=_LEGEND,
    )
    return fig


def _band_runs(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """The runs of consecutive rows that have both band edges, in order."""
    has = frame["band_low"].notna() & frame["band_high"].notna()
    run_id = (has != has.shift()).cumsum()
    return [rows for _, rows in frame[has].groupby(run_id[has], sort=True)]
