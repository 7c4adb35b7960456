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
from app.ui.data import fleet as data
from app.ui.data import probes as probe_data
from ingest import MAX_LIMIT, SinkError
from schemas.fleet import InstanceSnapshot
from schemas.queries import TraceFilter, TracePage
from schemas.records import RouterEvent

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
    """One instance's snapshots over the window, the window's router events naming it, and its requests."""
    store = resources.get_store()
    snaps = data.read_spread(lambda s, e: store.snapshots(s, e, instance=instance, limit=50), start, end)
    # The newest events first: a busy window has more than one page, oldest first.
    read, _ = probe_data.read_newest(lambda s, e: store.events(s, e), start, end, key=lambda e: e.event_id,
                                     page=MAX_LIMIT, max_pages=4, chunks=4)
    events = [e for e in read if e.instance == instance]
    page = store.search(TraceFilter.model_validate_json(flt), limit=50)
    return {"snapshots": [s.model_dump(mode="json") for s in snaps],
            "events": [e.model_dump(mode="json") for e in events], "page": page.model_dump(mode="json")}


def grid_now(sc: sidebar.Scope, back_s: int, th: Any) -> tuple[Any, str]:
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
        return data.cells(live, th, known=pairs), "Live state (GET /v1/router/state)"
    stored = data.at_moment((InstanceSnapshot.model_validate(s) for s in fetch_at(moment, known)), moment)
    why = f"; live state unavailable: {problem}" if problem else ""
    where = f"Stored snapshots at {moment:%Y-%m-%d %H:%M:%S} UTC{why}"
    return data.cells(stored, th, moment=moment, known=pairs), where


@st.fragment(run_every=REFRESH_S)
def body(scope: sidebar.Scope, back_s: int) -> None:
    """The grid and the chosen instance, refreshed every few seconds over a window ending now."""
    th, th_problem = data.thresholds_from_env()
    end = data.floor_time(datetime.now(UTC), REFRESH_S)  # reruns within a refresh share the cache
    sc = dataclasses.replace(scope, start=end - (scope.end - scope.start), end=end)
    if th_problem:
        st.warning(f"Default thresholds in use: {th_problem}.")
    try:
        grid, where = grid_now(sc, back_s, th)
    except SinkError as exc:
        st.error(f"Trace store unreachable: {exc}")
        return
    if sc.model:
        grid = grid[grid["model"] == sc.model]
    if grid.empty:
        st.info("No instance state at this moment: no gateway answers `GET /v1/router/state` and the store "
                "holds no snapshot. Start `routelens serve` (it scrapes every instance each second).")
        return
    st.caption(f"{where}. Thresholds (yellow / red): KV {th.kv_cache_usage.yellow:.0%} / "
               f"{th.kv_cache_usage.red:.0%}, queue {th.queue.yellow:g} / {th.queue.red:g}, errors "
               f"{th.error_rate.yellow:.0%} / {th.error_rate.red:.0%}, p95 TTFT {th.ttft_p95_ms.yellow:,.0f} / "
               f"{th.ttft_p95_ms.red:,.0f} ms; grey: state older than {th.stale_after_s:g} s.")
    event = st.plotly_chart(charts.health_grid_chart(grid), on_select="rerun", selection_mode="points",
                            key="fleet_grid")
    points = list(getattr(getattr(event, "selection", None), "points", None) or [])
    if points:
        custom = points[0].get("customdata")
        clicked = custom[1] if isinstance(custom, list) and len(custom) > 1 else charts.instance_at(
            grid, str(points[0].get("y")), int(points[0].get("x", -1)))
        if clicked and clicked != st.session_state.get("fleet_clicked"):
            st.session_state["fleet_clicked"] = st.session_state["fleet_instance"] = clicked
    order = grid.sort_values("status", key=lambda s: s.map({"red": 0, "yellow": 1, "grey": 2, "green": 3}),
                             kind="stable")["instance"].tolist()
    if "fleet_instance" not in st.session_state or st.session_state["fleet_instance"] not in [*order, None]:
        st.session_state["fleet_instance"] = sc.instance if sc.instance in order else None
    with st.expander("Grid as a table"):
        st.dataframe(grid, hide_index=True, column_config=LINKS)
    instance = st.selectbox("Instance (worst first; or click a cell)", order, key="fleet_instance",
                            index=None, placeholder="pick an instance")
    if instance:
        detail(sc, str(instance), th)


def detail(sc: sidebar.Scope, instance: str, th: Any) -> None:
    """The chosen instance over the window: metrics with thresholds, latch transitions, requests served."""
    st.subheader(instance)
    flt = sc.trace_filter().model_copy(update={"instance": instance})
    try:
        found = fetch_detail(instance, sc.start, sc.end, flt.model_dump_json())
    except SinkError as exc:
        st.error(f"Trace store unreachable: {exc}")
        return
    snaps = [InstanceSnapshot.model_validate(s) for s in found["snapshots"]]
    transitions = data.latch_transitions(snaps, [RouterEvent.model_validate(e) for e in found["events"]])
    series = data.instance_series(snaps)
    if series.empty:
        st.info(f"No stored snapshot of `{instance}` in the window.")
    else:
        st.plotly_chart(charts.instance_metrics_chart(series, th, instance, transitions))
    st.markdown("**Latch transitions and router events**")
    if transitions.empty:
        st.caption("No latch changed and no router event named this instance in the window.")
    else:
        st.dataframe(transitions, hide_index=True)
    page = TracePage.model_validate(found["page"])
    st.markdown(f"**Requests it served** (latest {len(page.items)})")
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
back = int(st.select_slider("Moment", stops, key="fleet_at", format_func=data.offset_label))
sidebar.sync_param("at", str(back) if back else None)
body(scope, back)
