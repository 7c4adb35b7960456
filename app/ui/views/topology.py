"""Traffic topology: rule → model → instance as a Sankey over the sidebar's window, fallback flows and
rejected candidates (by constraint) coloured apart, optionally two arms or versions side by side
(thin page; data from app.ui.data.topology, pictures from app.ui.charts.topology)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import streamlit as st

from app.ui import resources, sidebar
from app.ui.charts import topology as charts
from app.ui.data import topology as data
from app.units import count
from ingest import SinkError
from schemas.queries import ConstraintStat, TraceFilter, TrafficEdge

REFRESH_S = 5
COMPARE = {"off": None, "arm": "experiment_arm", "version": "router_version"}
SEND_TRAFFIC = ("No traffic in this window. Send some: `routelens demo` runs a fleet with traffic, or point "
                "clients at `routelens serve` (`POST /v1/chat/completions`); then widen the window.")
LINKS = {"decisions": st.column_config.LinkColumn("decisions", display_text="decisions ›"),
         "share": st.column_config.NumberColumn("share", format="percent")}


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def fetch_traffic(flt: str) -> list[dict[str, Any]]:
    """Traffic edges of one filter (JSON of a TraceFilter), as JSON dicts."""
    return [e.model_dump(mode="json") for e in resources.get_store().traffic(TraceFilter.model_validate_json(flt))]


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def fetch_constraint_stats(flt: str) -> list[dict[str, Any]] | None:
    """Constraint removals of one filter; None while the store does not answer them yet."""
    method = getattr(resources.get_store(), "constraint_stats", None)
    if method is None:
        return None
    return [s.model_dump(mode="json") for s in method(TraceFilter.model_validate_json(flt))]


def synced(key: str, default: str) -> str:
    """The URL's ``?<key>=`` on a session's first run, the widget's value after (see app.ui.sidebar)."""
    if key not in st.session_state:
        st.session_state[key] = st.query_params.get(key, default)
    return str(st.session_state[key])


def now_end(pinned: datetime | None) -> datetime:
    """The window's end: the pinned ``?end=``, else now floored to the refresh step (a cache key per step)."""
    if pinned is not None:
        return pinned
    now = datetime.now(UTC)
    return now.replace(microsecond=0, second=now.second - now.second % REFRESH_S)


def draw(sc: sidebar.Scope, title: str, key: str, show_rejected: bool, **override: str | None) -> None:
    """One Sankey of ``sc`` (``override`` replaces scope fields, e.g. the arm), its node links and table."""
    flt = sc.trace_filter(**override)
    base = {k: st.query_params.get(k) for k in data.SCOPE_PARAMS} | {k: v for k, v in override.items() if v}
    try:
        edges = [TrafficEdge.model_validate(e) for e in fetch_traffic(flt.model_dump_json())]
        fallback = [TrafficEdge.model_validate(e) for e in
                    fetch_traffic(flt.model_copy(update={"fallback": True}).model_dump_json())]
        raw_stats = fetch_constraint_stats(flt.model_dump_json()) if show_rejected else []
    except SinkError as exc:
        st.error(f"Trace store unreachable: {exc}")
        return
    if raw_stats is None:
        st.caption("Rejected candidates are not shown: this store does not answer constraint stats yet "
                   "(`GET /v1/analytics/constraints`).")
    stats = [ConstraintStat.model_validate(s) for s in raw_stats or []]
    if not any(e.requests for e in edges):
        st.info(SEND_TRAFFIC)
        return
    nodes, links = data.sankey_frames(edges, fallback, stats, base)
    total, back = sum(e.requests for e in edges), sum(e.requests for e in fallback)
    st.caption(f"{count(total, 'request')}, {back:,} with a fallback (amber)"
               + (f"; {count(sum(s.removed for s in stats), 'candidate removal')} (red)" if stats else ""))
    st.plotly_chart(charts.sankey_chart(nodes, links, title), key=f"sankey_{key}")
    picks = nodes
    options = [f"{r.kind}: {r.name}" for r in picks.itertuples()]
    chosen = st.selectbox("Open the decisions behind", options, index=None, key=f"node_{key}",
                          placeholder="a rule, model, instance or constraint")
    if chosen is not None:
        row = picks.iloc[options.index(chosen)]
        st.markdown(f"[Decisions behind {row['kind']} `{row['name']}` ›]({row['link']})")
    with st.expander("Flows table"):
        st.dataframe(data.edge_table(edges, fallback, base), hide_index=True, column_config=LINKS)


st.title("Traffic topology")
st.caption("Requests along rule → model → instance; amber: requests that fell back; "
           "red: candidates a constraint removed (counted in removals).")
pinned = data.parse_url_time(st.query_params.get("end"))
scope = sidebar.scope(now=now_end(pinned))
if pinned is not None:
    st.caption(f"Window pinned to end at {pinned.isoformat()} (`?end=`); not refreshing.")

left, right = st.columns([1, 2])
with left:
    if "rejected" not in st.session_state:
        st.session_state["rejected"] = st.query_params.get("rejected") != "0"
    show_rejected = st.toggle("Rejected candidates", key="rejected")
    sidebar.sync_param("rejected", None if show_rejected else "0")
with right:
    synced("compare", "off")
    if st.session_state["compare"] not in COMPARE:
        st.session_state["compare"] = "off"
    compare = str(st.radio("Compare side by side", list(COMPARE), key="compare", horizontal=True))
    sidebar.sync_param("compare", None if compare == "off" else compare)

sides: list[str] = []
if compare != "off":
    a, b = st.columns(2)
    for col, name in ((a, "cmp_a"), (b, "cmp_b")):
        synced(name, "")
        with col:
            value = st.text_input(f"{compare} {name[-1].upper()}", key=name, placeholder=f"an {compare}").strip()
        sidebar.sync_param(name, value or None)
        sides.append(value)


@st.fragment(run_every=None if pinned else REFRESH_S)
def live() -> None:
    """The Sankey(s), redrawn every few seconds over a window that moves with the clock."""
    end = now_end(pinned)
    sc = dataclasses.replace(scope, start=end - (scope.end - scope.start), end=end)
    field = COMPARE[compare]
    if field is None or not all(sides):
        if field is not None:
            st.caption(f"Name two values of {compare} to compare them.")
        draw(sc, f"Traffic · last {sc.window}", "main", show_rejected)
        return
    for col, side, value in zip(st.columns(2), "AB", sides, strict=True):
        with col:
            draw(sc, f"{compare} {value}", side, show_rejected, **{field: value})


live()
