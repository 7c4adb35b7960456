"""Constraint pictures: latch state now (instance × constraint), out-intervals over time, binding counts."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import plotly.graph_objects as go

from app.ui.data.big_fleet import CHART_ROWS

__all__ = ["BINDING_COLOURS", "MIN_BAR_SHARE", "STATE_COLOURS", "binding_chart", "state_chart", "timeline_chart"]

STATE_COLOURS: dict[str, str] = {"in": "#2e9e44", "out": "#d62728", "n/a": "#e0e0e0"}
BINDING_COLOURS: dict[str, str] = {
    "decisive": "#d62728", "not_decisive": "#f0a202", "undecided": "#b0b0b0", "soft": "#9ecae9",
}
BINDING_NAMES = {"decisive": "decisive (removed the would-be winner)", "not_decisive": "removed, not decisive",
                 "undecided": "removed, undecided (no score terms)", "soft": "soft (score scaled, kept)"}
OPEN_COLOUR, CLOSED_COLOUR = "#d62728", "rgba(214,39,40,0.55)"
# The narrowest bar, as a share of the window: about 4 px of a 900 px plot. A 20 s interval is a
# tenth of a pixel at 6 h; drawn at its width it vanishes, so it is drawn at this one (hover keeps the truth).
MIN_BAR_SHARE = 4 / 900
_CODES = {state: code for code, state in enumerate(STATE_COLOURS)}
_MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}
_LEGEND = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1}


def _scale() -> list[list[float | str]]:
    n, scale = len(STATE_COLOURS), list[list[float | str]]()
    for code, colour in enumerate(STATE_COLOURS.values()):
        scale += [[code / n, colour], [(code + 1) / n, colour]]
    return scale


def _cell(row: pd.Series | None) -> tuple[int, str, str]:
    """Colour code, cell text and hover of one latch (None: the instance has no such latch)."""
    if row is None:
        return _CODES["n/a"], "n/a", "no latch"
    value = str(row["reading"]) if "reading" in row and isinstance(row["reading"], str) else (
        "—" if pd.isna(row["value"]) else f"{row['value']:.3g}")
    since = "" if row["since"] is None or pd.isna(row["since"]) else f" since {row['since']:%H:%M:%S}"
    state = str(row["state"])
    shown = f"{state} {value}" if value != "—" else state
    return _CODES[state], shown, f"{state}{since}<br>value / threshold: {value}"


def state_chart(rows: pd.DataFrame) -> go.Figure:
    """One cell per (instance, constraint) of :func:`app.ui.data.constraints.state_rows`: in green, out red.

    A constraint an instance has no latch for is grey (``n/a``); a stale instance is marked in its label.
    Empty (no traces) without rows.
    """
    fig = go.Figure()
    if rows.empty:
        return fig
    stale = set(rows.loc[rows["stale"], "instance"])
    instances = list(dict.fromkeys(rows["instance"]))
    constraints = sorted(set(rows["constraint"]))
    cell = rows.set_index(["instance", "constraint"])
    z, text, hover = [], [], []
    for inst in instances:
        zr, tr, hr = [], [], []
        for name in constraints:
            code, label, tip = _cell(cell.loc[(inst, name)] if (inst, name) in cell.index else None)
            zr.append(code)
            tr.append(label)
            hr.append(tip)
        z.append(zr)
        text.append(tr)
        hover.append(hr)
    labels = [f"{i} (stale)" if i in stale else i for i in instances]
    dense = len(instances) > CHART_ROWS  # a big fleet: thin rows without cell text (the hover says it all)
    fig.add_trace(go.Heatmap(
        z=z, x=constraints, y=labels, text=text, customdata=hover, texttemplate="" if dense else "%{text}",
        colorscale=_scale(), zmin=-0.5, zmax=len(STATE_COLOURS) - 0.5, showscale=False, xgap=3, ygap=3,
        hovertemplate="%{y} · %{x}: %{customdata}<extra></extra>",
    ))
    fig.update_layout(title="Latches now", height=120 + (14 if dense else 36) * len(instances), margin=_MARGIN,
                      yaxis={"autorange": "reversed"}, xaxis={"side": "top"})
    return fig


def timeline_chart(
    intervals: pd.DataFrame, start: datetime, end: datetime, events: pd.DataFrame | None = None
) -> go.Figure:
    """Out-intervals of :func:`app.ui.data.constraints.latch_intervals` as a Gantt, one row per (instance, constraint).

    Closed intervals are translucent red, intervals still open at the end solid red and drawn to
    ``end``; the x axis spans the window. A bar is at least :data:`MIN_BAR_SHARE` of the window
    wide, so the shortest interval still shows at a long window (its hover gives the true times).
    ``events`` (:func:`~app.ui.data.constraints.latch_events`) add markers on their row when they
    name a constraint. Empty (no traces) without intervals.
    """
    fig = go.Figure()
    if intervals.empty:
        return fig
    frame = intervals.assign(row=intervals["instance"] + " · " + intervals["constraint"])
    narrowest = (end - start).total_seconds() * 1000 * MIN_BAR_SHARE
    for is_open, name, colour in ((False, "out (closed again)", CLOSED_COLOUR), (True, "out (still)", OPEN_COLOUR)):
        part = frame[frame["is_open"] == is_open]
        if part.empty:
            continue
        stop = [end if is_open else e for e in part["end"]]
        fig.add_trace(go.Bar(
            name=name, orientation="h", y=part["row"], base=part["start"].tolist(), marker={"color": colour},
            x=[max((b - a).total_seconds() * 1000, narrowest) for a, b in zip(part["start"], stop, strict=True)],
            customdata=[[str(a), "now" if is_open else str(b), f"{d:.0f}"]
                        for a, b, d in zip(part["start"], stop, part["duration_s"], strict=True)],
            hovertemplate="%{y}<br>out %{customdata[0]} → %{customdata[1]} (%{customdata[2]} s)<extra></extra>",
        ))
    if events is not None and not events.empty:
        named = events.dropna(subset=["instance", "constraint"])
        if not named.empty:
            fig.add_trace(go.Scatter(
                name="latch event", mode="markers", x=named["ts"], y=named["instance"] + " · " + named["constraint"],
                marker={"symbol": "line-ns-open", "size": 14, "color": "#333333"}, text=named["message"],
                hovertemplate="%{x}<br>%{text}<extra></extra>",
            ))
    rows = sorted(set(frame["row"]))
    fig.update_layout(
        title="Out-intervals per instance and constraint", barmode="overlay", height=140 + 30 * len(rows),
        xaxis={"type": "date", "range": [start, end]}, yaxis={"categoryorder": "array", "categoryarray": rows[::-1]},
        margin=_MARGIN, legend=_LEGEND,
    )
    return fig


def binding_chart(counts: pd.DataFrame) -> go.Figure:
    """Per constraint, removals stacked as decisive / not decisive / undecided; soft violations as markers.

    Args:
        counts: Rows of :func:`app.ui.data.constraints.binding_counts`.

    Returns:
        Three stacked horizontal bar traces and a ``soft`` marker trace (colours
        :data:`BINDING_COLOURS`); undecided is drawn grey, never folded into either side; empty
        (no traces) without rows.
    """
    fig = go.Figure()
    if counts.empty:
        return fig
    for part in ("decisive", "not_decisive", "undecided"):
        fig.add_trace(go.Bar(
            name=BINDING_NAMES[part], orientation="h", y=counts["constraint"].tolist(), x=counts[part].tolist(),
            marker={"color": BINDING_COLOURS[part]},
            hovertemplate="%{y}: %{x} " + BINDING_NAMES[part] + "<extra></extra>",
        ))
    # Soft violations removed nothing: a marker beside the bar, never part of its length.
    fig.add_trace(go.Scatter(
        name=BINDING_NAMES["soft"], mode="markers", y=counts["constraint"].tolist(), x=counts["soft"].tolist(),
        marker={"color": BINDING_COLOURS["soft"], "symbol": "diamond", "size": 11, "line": {"width": 1}},
        hovertemplate="%{y}: %{x} " + BINDING_NAMES["soft"] + "<extra></extra>",
    ))
    fig.update_layout(title="How often each constraint bound", barmode="stack", height=160 + 40 * len(counts),
                      yaxis={"autorange": "reversed"}, xaxis={"title": "candidates"}, margin=_MARGIN, legend=_LEGEND)
    return fig
