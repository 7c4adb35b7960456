"""The pieces of pages that link probes to traffic (data from :mod:`app.ui.data.probe_window`).

``bad_window_section``: on the probes page, the instance's bad windows, the requests it served in
the chosen one, and where each would have gone without it. ``verdicts_section``: on "Why this
model", the probe verdicts of the chosen instance at the moment of the decision.
"""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime, timedelta
from typing import Any

import streamlit as st

from app.experiments.verify import PolicyShelf
from app.ui import resources, widgets
from app.ui.data import probe_reading as reading
from app.ui.data.fleet import trace_link
from app.ui.data.probe_window import VERDICT_LOOKBACK, BadWindow, bad_windows, verdicts_at, window_at, without
from app.ui.data.topology import parse_url_time
from app.ui.limits import load_limits
from app.units import DASH
from ingest import SinkError
from schemas.probe import ProbeResult
from schemas.queries import TraceFilter, TraceSummary

__all__ = ["bad_window_section", "served_row", "verdicts_section", "window_link"]

SERVED_SHOWN = 50  # requests listed per window
REDECIDED = 20  # of them, re-decided without the instance (each reads its whole trace)


def _label(w: BadWindow) -> str:
    end = "still bad" if w.end is None else f"to {w.end:%H:%M:%S}"
    return f"{w.start:%Y-%m-%d %H:%M:%S} {end} UTC · {w.worst.value} · {', '.join(w.kinds)}"




def window_link(instance: str, at: datetime) -> str:
    """The Probes page of ``instance`` at the bad window holding ``at`` (the time encoded: ``+`` kept)."""
    return "probes?" + urllib.parse.urlencode({"instance": instance, "at": at.isoformat()})


def served_row(item: TraceSummary, elsewhere: str) -> dict[str, Any]:
    """One request of the "requests it served" table; its latency is the request's, not the decision's."""
    return {"ts": item.ts, "request": trace_link(item.request_id), "model": item.selected_model,
            "outcome": item.outcome_status.value, "latency ms": round(item.total_ms), "without it": elsewhere}


def _at_param() -> datetime | None:
    return parse_url_time(st.query_params.get("at"))


def bad_window_section(instance: str, series: list[ProbeResult]) -> None:
    """The bad windows of ``instance`` in ``series`` and the traffic of the chosen one (``?at=`` picks it)."""
    st.subheader(f"When {instance} was bad, and the requests it served")
    if not any(r.instance == instance for r in series):
        st.caption(f"No probe results of {instance} in the window: nothing says whether it was bad.")
        return
    windows = bad_windows(series, instance)
    if not windows:
        st.caption(f"Every probe of {instance} passed in the window.")
        return
    chosen = window_at(windows, _at_param()) or windows[-1]
    labels = [_label(w) for w in reversed(windows)]
    picked = st.selectbox(f"Bad windows of {instance} ({len(windows)}, newest first)", labels,
                          index=labels.index(_label(chosen)), key="bad_window")
    window = next(w for w in windows if _label(w) == picked)
    if window.reasons:
        st.text("; ".join(window.reasons))
    end = window.end or datetime.now(UTC)
    try:
        store = resources.get_store()
        page = store.search(TraceFilter(instance=instance, start=window.start, end=end), limit=SERVED_SHOWN)
    except SinkError as exc:
        st.error(widgets.plain(f"Trace source unreachable: {exc}"))
        return
    if not page.items:
        st.success(f"{instance} served no request in this window: no traffic was exposed to it.")
        return
    shelf = PolicyShelf(store.policy)
    rows: list[dict[str, Any]] = []
    for i, item in enumerate(page.items):
        elsewhere = "-"
        if i < REDECIDED and (trace := store.get(item.request_id)) is not None:
            elsewhere = without(trace, instance, shelf)
        rows.append(served_row(item, elsewhere))
    more = " (the latest only)" if page.next_cursor else ""
    noun = "request" if len(rows) == 1 else "requests"
    st.caption(f"{len(rows)} {noun} served by {instance} while it was bad{more}; 'without it' is each decision "
               f"re-decided under its own stored policy with {instance} out (the first {REDECIDED}).")
    st.dataframe(rows, hide_index=True, column_config={
        "request": st.column_config.LinkColumn("request", display_text=r"request_id=(.*)")})


def verdicts_section(instance: str | None, at: datetime) -> None:
    """The latest probe verdict of each kind of ``instance`` before the decision at ``at``."""
    if instance is None:
        return
    st.subheader(f"Probes of {instance} at that moment")
    try:
        results = resources.get_store().probe_timeline(at - VERDICT_LOOKBACK, at + timedelta(microseconds=1),
                                                       instance=instance)
    except SinkError as exc:
        st.caption(widgets.plain(f"Probe results unavailable: {exc}"))
        return
    found = verdicts_at(results, instance, at)
    minutes = int(VERDICT_LOOKBACK.total_seconds() // 60)
    if not found:
        st.caption(f"No probe result of {instance} in the {minutes} minutes before the decision.")
        return
    lim = load_limits()
    rows = [{"kind": r.kind.value, "verdict": reading.verdict_of(r, lim),
             "seconds before": round((at - r.ts).total_seconds()), "value / limit": reading.reading_of(r, lim),
             "reason": r.reason or DASH} for r in found]
    st.dataframe(rows, hide_index=True)
    if any(row["verdict"] != "ok" for row in rows):
        st.markdown(f"[The window {instance} was bad in, and the other requests it served]"
                    f"({window_link(instance, at)})")
