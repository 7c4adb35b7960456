"""Fleet health: one cell per (model, instance), green / yellow / red by per-metric thresholds, grey when stale;
a slider over the window shows any past moment; an instance opens its metrics, latch transitions and requests
(thin page: data from app.ui.data.fleet, pictures from app.ui.charts.fleet)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import streamlit as st

from app import reader
from app.ui import resources, sidebar
from app.ui.charts import fleet as charts
from app.ui.data import big_fleet
from app.ui.data import fleet as data
from app.ui.data import instance_window as window
from app.ui.data import probes as probe_data
from app.ui.limits import Limits, load_limits
from app.units import METRIC_NAMES, count, fmt
from ingest import MAX_LIMIT, SinkError
from schemas.fleet import InstanceSnapshot
from schemas.queries import TraceFilter, TracePage

REFRESH_S = 5
LINKS = {"open": st.column_config.LinkColumn("open", display_text="why ›"),
         "link": st.column_config.LinkColumn("scope", display_text="instance ›")}


@st.cache_data(ttl=2, show_spinner=False)
def fetch_state() -> Any:
    """``GET /v1/router/state`` of the live gateway; None when the app reads a file and names no gateway."""
    server = data.live_api()
    return None if server is None else reader.fetch_json(server[0], "/v1/router/state", server[1])


@st.cache_data(ttl=REFRESH_S, max_entries=64, show_spinner=False)
def fetch_at(moment: datetime, expected: tuple[str, ...]) -> list[dict[str, Any]]:
    """Stored snapshots just before ``moment`` (enough of them to place every expected instance)."""
    store = resources.get_store()
    got = data.read_back(lambda s, e: store.snapshots(s, e), moment, expected=expected)
    return [s.model_dump(mode="json") for s in got]


@st.cache_data(ttl=REFRESH_S, max_entries=32, show_spinner=False)
def fetch_served(flt: str) -> list[tuple[str, str]]:
    """``(model, instance)`` pairs that served requests of the window (a grid cell each, grey without state)."""
    edges = resources.get_store().traffic(TraceFilter.model_validate_json(flt))
    return sorted({(e.model, e.instance) for e in edges if e.model and e.instance})


@st.cache_data(ttl=REFRESH_S, max_entries=32, show_spinner=False)
def fetch_detail(instance: str, start: datetime, end: datetime, flt: str) -> dict[str, Any]:
    """One instance over the whole window: its metrics as a chart draws them, latch changes and events, requests."""
    store = resources.get_store()
    got = window.read_window(lambda s, e, n: store.snapshots(s, e, instance=instance, limit=n), start, end,
                             page=MAX_LIMIT)
    series, width = window.bucketed(data.instance_series(got.snapshots), start, end)
    # The newest events first: a busy window has more than one page, oldest first.
    read, _ = probe_data.read_newest(lambda s, e: store.events(s, e), start, end, key=lambda e: e.event_id,
                                     page=MAX_LIMIT, max_pages=4, chunks=4)
    events = [e for e in read if e.instance == instance]
    page = store.search(TraceFilter.model_validate_json(flt), limit=50)
    return {"series": series, "bucket_s": width.total_seconds() if width else None, "read": len(got.snapshots),
            "per_span": got.per_span, "transitions": data.latch_transitions(got.snapshots, events, load_limits()),
            "page": page.model_dump(mode="json")}


def series_caption(found: dict[str, Any]) -> str:
    """How the chart's points stand for the window's snapshots."""
    text = f"{count(found['read'], 'scrape')} of the window (the gauges as scraped)"
    if found["per_span"]:
        text += (f" (too many to read all: the oldest {count(found['per_span'], 'scrape')} of each of "
                 f"{window.SAMPLE_SPANS} equal spans)")
    if found["bucket_s"]:
        text += f"; each point is the highest value in {fmt(found['bucket_s'], 's')}"
    return text + "; a break in a line: no snapshot there."


def grid_now(sc: sidebar.Scope, back_s: int, lim: Limits, metric: str) -> tuple[Any, str]:
    """The cells to show and a caption saying where they come from."""
    moment = sc.end - timedelta(seconds=back_s)
    state, problem = None, None
    try:
        state = fetch_state()
    except SinkError as exc:
        problem = str(exc)
    live = data.live_snapshots(state if isinstance(state, dict) else None)
    pairs = [(s.model, s.instance) for s in live]
    pairs += fetch_served(sc.trace_filter().model_copy(update={"instance": None}).model_dump_json())
    known = tuple(sorted({i for _, i in pairs}))
    if back_s == 0 and live:
        return data.cells(live, lim, metric=metric, known=pairs), "Live state (GET /v1/router/state)"
    stored = data.at_moment((InstanceSnapshot.model_validate(s) for s in fetch_at(moment, known)), moment)
    why = f"; live state unavailable: {problem}" if problem else ""
    where = f"Stored snapshots at {moment:%Y-%m-%d %H:%M:%S} UTC{why}"
    return data.cells(stored, lim, metric=metric, moment=moment, known=pairs), where


@st.fragment(run_every=REFRESH_S)
def body(scope: sidebar.Scope, back_s: int, metric: str) -> None:
    """The grid and the chosen instance, refreshed every few seconds over a window ending now."""
    lim = load_limits()
    end = data.floor_time(datetime.now(UTC), REFRESH_S)  # reruns within a refresh share the cache
    sc = dataclasses.replace(scope, start=end - (scope.end - scope.start), end=end)
    if lim.problem:
        st.warning(f"Default limits in use: {lim.problem}.")
    try:
        grid, where = grid_now(sc, back_s, lim, metric)
    except SinkError as exc:
        st.error(f"Trace store unreachable: {exc}")
        return
    if sc.model:
        grid = grid[grid["model"] == sc.model]
    if grid.empty:
        st.info("No instance state at this moment: no gateway answers `GET /v1/router/state` and the store "
                "holds no snapshot. Start `routelens serve` (it scrapes every instance each second).")
        return
    limit = lim.limit(metric)
    layout = big_fleet.grid_layout(grid)  # a big fleet: wider rows, worst first, at most a screen of them
    tile = (f"Each tile's colour: {METRIC_NAMES[metric]} against its limit (value / limit on hover)" if layout.dense
            else f"Each tile: {METRIC_NAMES[metric]} as value / limit")
    st.caption(f"{where}. {tile}; "
               + (f"limit {limit.describe()}" if limit else "no limit configured")
               + f"; red also when a latch holds the instance out; grey: state older than "
               f"{fmt(lim.health.stale_after_s, 's')} (app.health.stale_after_s). Limits from {lim.source}.")
    if off := data.elsewhere(grid):
        st.warning("Over a limit on another metric: " + "; ".join(off) + ". Pick that metric above to see it.")
    note = big_fleet.grid_caption(layout, len(grid))
    points: list[Any] = []
    if layout.rows:
        if note:
            st.caption(note)
        event = st.plotly_chart(charts.health_grid_chart(grid), on_select="rerun", selection_mode="points",
                                key="fleet_grid")
        points = list(getattr(getattr(event, "selection", None), "points", None) or [])
    elif note:
        st.success(note)
    if points:
        custom = points[0].get("customdata")
        clicked = custom[1] if isinstance(custom, list) and len(custom) > 1 else charts.instance_at(
            grid, str(points[0].get("y")), int(points[0].get("x", -1)))
        if clicked and clicked != st.session_state.get("fleet_clicked"):
            st.session_state["fleet_clicked"] = st.session_state["fleet_instance"] = clicked
    rank = big_fleet.TILE_RANK
    order = grid.assign(_r=grid["status"].map(rank), _w=grid["worst_status"].map(rank).fillna(4)).sort_values(
        ["_r", "_w"], kind="stable")["instance"].tolist()  # worst first, then worst on any metric
    if "fleet_instance" not in st.session_state or st.session_state["fleet_instance"] not in [*order, None]:
        st.session_state["fleet_instance"] = sc.instance if sc.instance in order else None
    with st.expander("Grid as a table (every metric against its limit)"):
        st.dataframe(data.table(grid), hide_index=True, column_config=LINKS)
    instance = st.selectbox("Instance (worst first; or click a cell)", order, key="fleet_instance",
                            index=None, placeholder="pick an instance")
    if instance:
        model = grid.loc[grid["instance"] == instance, "model"]
        detail(sc, str(instance), lim, str(model.iloc[0]) if len(model) else None)


def detail(sc: sidebar.Scope, instance: str, lim: Limits, model: str | None) -> None:
    """The chosen instance over the window: metrics with thresholds, latch transitions, requests served."""
    st.subheader(instance)
    flt = sc.trace_filter().model_copy(update={"instance": instance})
    try:
        found = fetch_detail(instance, sc.start, sc.end, flt.model_dump_json())
    except SinkError as exc:
        st.error(f"Trace store unreachable: {exc}")
        return
    series, transitions = found["series"], found["transitions"]
    if not found["read"]:
        st.info(f"No stored snapshot of `{instance}` in the window.")
    else:
        st.plotly_chart(charts.instance_metrics_chart(series, lim, instance, transitions, model,
                                                      span=(sc.start, sc.end)), key="fleet_detail")
        st.caption(series_caption(found))
    st.markdown("**Latch transitions and router events**")
    if transitions.empty:
        st.caption("No latch changed and no router event named this instance in the window.")
    else:
        st.dataframe(transitions, hide_index=True)
    page = TracePage.model_validate(found["page"])
    st.markdown(f"**Requests it served** (latest {count(len(page.items), 'request')})")
    if page.items:
        st.dataframe(data.served_rows(page.items), hide_index=True, column_config=LINKS)
    else:
        st.caption("No request of the window was served by this instance.")


scope = sidebar.scope()
st.title("Fleet health")
stops = data.offsets(scope.end - scope.start)
if st.session_state.get("fleet_at") not in stops:  # first run, or another window: the URL's stop, else now
    asked = st.query_params.get("at", "0")
    st.session_state["fleet_at"] = int(asked) if asked.isdigit() and int(asked) in stops else 0
left, right = st.columns([3, 1])
back = int(left.select_slider("Moment", stops, key="fleet_at", format_func=data.offset_label))
sidebar.sync_param("at", str(back) if back else None)
if st.session_state.get("fleet_metric") not in data.METRICS:
    asked_metric = st.query_params.get("metric", data.METRICS[0])
    st.session_state["fleet_metric"] = asked_metric if asked_metric in data.METRICS else data.METRICS[0]
shown = str(right.selectbox("Tiles show", data.METRICS, key="fleet_metric", format_func=lambda m: METRIC_NAMES[m]))
sidebar.sync_param("metric", None if shown == data.METRICS[0] else shown)
body(scope, back, shown)
