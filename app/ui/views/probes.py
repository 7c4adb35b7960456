"""Probes & alerts: the last verdict of each probe per instance, similarity and latency against their
bounds in the running configuration, active and recent alerts (thin page; data from app.ui.data.probes
and probe_reading, pictures from app.ui.charts.probes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import streamlit as st

from app import reader
from app.ui import probe_traffic, resources, sidebar, widgets
from app.ui.charts import probes as charts
from app.ui.data import fleet as fleet_data
from app.ui.data import probe_reading as reading
from app.ui.data import probes as data
from app.ui.limits import load_limits
from app.units import count
from ingest import MAX_LIMIT, SinkError
from schemas.probe import ProbeResult
from schemas.records import RouterEvent

# The grid looks this far back at most: a kind with no result in it shows grey (silence is not health).
GRID_LOOKBACK = timedelta(minutes=10)
# A read budget per view: past it the newest part of the window is shown (and said so).
MAX_PAGES = 12
CHUNKS = 4
LINK = {"link": st.column_config.LinkColumn("open", display_text="instance ›")}


def _read(fetch: Any, start: datetime, end: datetime, key: Any, chunks: int) -> tuple[list[dict[str, Any]], bool]:
    items, since = data.read_newest(fetch, start, end, key=key, page=MAX_LIMIT, max_pages=MAX_PAGES, chunks=chunks)
    return [i.model_dump(mode="json") for i in items], since > start


@st.cache_data(ttl=5, show_spinner=False)
def fetch_results(window: str, instance: str | None) -> tuple[list[dict[str, Any]], bool]:
    """Probe results of the window, newest first (the grid's lookback at most when no instance is named)."""
    start, end = data.window_span(window, datetime.now(UTC))
    if instance is None:
        start = max(start, end - GRID_LOOKBACK)
    store = resources.get_store()
    return _read(lambda s, e: store.probe_timeline(s, e, instance=instance), start, end, lambda r: r.probe_id, CHUNKS)


@st.cache_data(ttl=5, show_spinner=False)
def fetch_alert_events(window: str) -> tuple[list[dict[str, Any]], bool]:
    """Router events of kind ``alert`` in the window."""
    start, end = data.window_span(window, datetime.now(UTC))
    store = resources.get_store()
    return _read(lambda s, e: store.events(s, e, kind="alert"), start, end, lambda e: e.event_id, CHUNKS)


@st.cache_data(ttl=5, show_spinner=False)
def fetch_live(path: str) -> Any:
    """A live view of the gateway (``/v1/alerts``, ``/v1/router/state``); None when reading a file and naming no
    gateway (``ROUTELENS_LIVE_URL``: the one the Fleet and Overview pages read)."""
    server = fleet_data.live_api()
    return None if server is None else reader.fetch_json(server[0], path, server[1])


def live_or_problem(path: str) -> tuple[Any, str | None]:
    try:
        found = fetch_live(path)
    except SinkError as exc:
        return None, str(exc)
    return found, None if found is not None else "the app reads a trace file and names no gateway (ROUTELENS_LIVE_URL)"


def synced_choice(label: str, options: list[str], key: str, default: str) -> str:
    """A horizontal radio kept in ``?<key>=`` and the sidebar's scope (a link or another page opens the same view)."""
    if key not in st.session_state:
        wanted = sidebar.kept(key) or default
        st.session_state[key] = wanted if wanted in options else default
    value = str(st.radio(label, options, key=key, horizontal=True))
    sidebar.keep(key, value if value != default else None)
    st.query_params[key] = value
    return value


st.title("Probes & alerts")
st.caption("Synthetic probes of every instance (syntax, latency baseline, semantic fidelity) and their alerts.")

window = synced_choice("Window", list(data.WINDOWS), "window", data.DEFAULT_WINDOW)
try:
    raw_results, grid_cut = fetch_results(window, None)
    raw_events, events_cut = fetch_alert_events(window)
except SinkError as exc:
    st.error(f"Probe source unreachable: {exc}")
    st.stop()
results = [ProbeResult.model_validate(r) for r in raw_results]
lim = load_limits()
if lim.problem:
    st.warning(f"Default limits in use: {lim.problem}.")
state, state_problem = live_or_problem("/v1/router/state")
grid = data.last_verdicts(results, data.held_verdicts(state if isinstance(state, dict) else None), limits=lim)
order = data.instances_worst_first(grid)

alerts, alerts_problem = live_or_problem("/v1/alerts")
active = data.active_alerts(alerts if isinstance(alerts, dict) else None)
st.subheader("Active alerts")
if alerts_problem:
    st.warning(f"Active alerts unavailable ({alerts_problem}); recent alert events are below.")
elif active.empty:
    st.success("No alert is firing or pending.")
for line, seen in zip(data.active_alert_lines(active, window), active["description"], strict=True):
    st.markdown(line)
    if isinstance(seen, str) and seen:  # what the instance showed: value, baseline, error (the webhook's text)
        st.caption(widgets.plain(seen))

lookback = min(data.WINDOWS[window], GRID_LOOKBACK).seconds // 60
if grid.empty:
    st.info(f"No probe results yet (last {lookback} minutes). "
            "Probes run inside `routelens serve` (or `routelens probes run`) every 30 s.")
else:
    st.caption(f"Verdict of each probe, worst instance first: the router's (hysteresis: what it routes by) "
               f"where it answers, else the last result in the last {lookback} minutes; grey: no result "
               "(silence is not health). " + reading.limits_caption(lim))
    if grid_cut:
        st.caption("Too many results to read them all: the grid shows the newest part of the lookback.")
    st.plotly_chart(charts.verdict_grid_chart(grid, order))
    if state_problem:
        st.caption(f"Router verdicts (hysteresis) unavailable: {state_problem}.")
    with st.expander("Verdict table"):
        st.dataframe(reading.verdict_table(grid), hide_index=True, column_config=LINK)

    asked = sidebar.kept("instance")  # the link's, else the scope of the page this one was entered from
    options = order + ([asked] if asked and asked not in order else [])
    if "instance" not in st.session_state:
        st.session_state["instance"] = asked if asked in options else order[0]
    instance = str(st.selectbox("Instance (worst first)", options, key="instance"))
    st.query_params["instance"] = instance
    try:
        series_raw, series_cut = fetch_results(window, instance)
    except SinkError as exc:
        st.error(f"Probe source unreachable: {exc}")
        st.stop()
    series = [ProbeResult.model_validate(r) for r in series_raw]
    if series_cut:
        st.caption(f"Showing the latest {count(len(series), 'result')} of the window only; pick a shorter one "
                   "for all.")
    similarity = data.similarity_series(series, instance, limits=lim)
    latency = data.latency_series(series, instance, limits=lim)
    left, right = st.columns(2)
    with left:
        if similarity.empty:
            st.info(f"No semantic probe results for `{instance}` in the window.")
        else:
            st.plotly_chart(charts.similarity_chart(similarity, instance))
    with right:
        if latency.empty:
            st.info(f"No latency probe results for `{instance}` in the window.")
        else:
            st.plotly_chart(charts.latency_chart(latency, instance))
    with st.expander(f"Probe results of {instance}"):
        st.dataframe(reading.results_table(series, lim), hide_index=True)
    probe_traffic.bad_window_section(instance, reading.judged(series, lim))

st.subheader("Recent alerts")
recent = data.recent_alerts([RouterEvent.model_validate(e) for e in raw_events])
if recent.empty:
    st.caption("No alert fired or resolved in the window.")
else:
    st.caption(f"{count(len(recent), 'alert event')} in the window" + (" (the latest only)" if events_cut else ""))
    with st.expander("Alert events", expanded=True):
        st.dataframe(recent, hide_index=True, column_config=LINK)
