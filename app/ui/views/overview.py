"""Overview: traffic, errors, fallbacks, latency and cost over the sidebar's window, against the window before;
the busiest rules and models, recent misroutes and active alerts (thin page: app.ui.data / app.ui.charts)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import streamlit as st

from app import reader
from app.ui import resources, sidebar, widgets
from app.ui.charts import overview as charts
from app.ui.data import fleet as fleet_data
from app.ui.data import overview as data
from app.ui.data import probes as probe_data
from app.ui.limits import load_limits
from ingest import SinkError, SinkUnavailable
from schemas.queries import AggregateQuery, BucketStats, Misroute, TraceFilter, TrafficEdge

REFRESH_S = 5
LAG_S = 3
ROW_PX, HEAD_PX = 35, 38
OPEN = {"open": st.column_config.LinkColumn("open", display_text="why ›"),
        "ts": st.column_config.DatetimeColumn("feedback at (UTC)", format="YYYY-MM-DD HH:mm:ss")}


@st.cache_data(ttl=REFRESH_S, max_entries=64, show_spinner=False)
def fetch_buckets(flt: str, bucket: str) -> list[dict[str, Any]]:
    """Buckets of the filter (JSON of a TraceFilter)."""
    query = AggregateQuery.model_validate({"filter": TraceFilter.model_validate_json(flt), "bucket": bucket})
    return [b.model_dump(mode="json") for b in resources.get_store().aggregate(query)]


@st.cache_data(ttl=REFRESH_S, max_entries=64, show_spinner=False)
def fetch_window(flt: str) -> tuple[bool, dict[str, Any] | None]:
    """The filter's window as one bucket (its own latency quantiles): (answered, stats or None when empty).

    ``answered`` is False when the store cannot answer (no ``window_stats``, or a server without the route).
    """
    query = getattr(resources.get_store(), "window_stats", None)
    if query is None:
        return False, None
    try:
        found = query(TraceFilter.model_validate_json(flt))
    except SinkUnavailable:
        raise
    except SinkError:  # a server from before the route: fall back to the buckets' quantiles
        return False, None
    return True, None if found is None else found.model_dump(mode="json")


def windows(*filters: TraceFilter) -> tuple[BucketStats | None, ...] | None:
    """Each filter's window as one bucket, or None when the store answers no window figures."""
    found = [fetch_window(f.model_dump_json()) for f in filters]
    if not all(ok for ok, _ in found):
        return None
    return tuple(None if w is None else BucketStats.model_validate(w) for _, w in found)


@st.cache_data(ttl=REFRESH_S, max_entries=64, show_spinner=False)
def fetch_traffic(flt: str) -> list[dict[str, Any]]:
    """Traffic edges of the filter."""
    return [e.model_dump(mode="json") for e in resources.get_store().traffic(TraceFilter.model_validate_json(flt))]


@st.cache_data(ttl=REFRESH_S, max_entries=64, show_spinner=False)
def fetch_misroutes(flt: str) -> list[dict[str, Any]] | None:
    """The latest misroutes (feedback) of the filter; None when the store has no misroute query yet."""
    store = resources.get_store()
    query = getattr(store, "misroutes", None)
    if query is None:
        return None
    return [m.model_dump(mode="json") for m in query(TraceFilter.model_validate_json(flt), limit=20)]


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def fetch_alerts() -> Any:
    """``GET /v1/alerts`` of the live gateway; None when the app reads a file and names no gateway."""
    server = fleet_data.live_api()
    return None if server is None else reader.fetch_json(server[0], "/v1/alerts", server[1])


def show_alerts(window: str | None = None) -> None:
    """Active alerts, or why they cannot be shown; each links to its instance's Probes page over ``window``."""
    st.subheader("Active alerts")
    try:
        payload = fetch_alerts()
    except SinkError as exc:
        st.caption(f"Active alerts unavailable: {exc}.")
        return
    if payload is None:
        st.caption("Active alerts unavailable: the app reads a trace file (set ROUTELENS_LIVE_URL to a gateway).")
        return
    active = probe_data.active_alerts(payload)
    if active.empty:
        st.success("No alert is firing or pending.")
    for line, seen in zip(probe_data.active_alert_lines(active, window), active["description"], strict=True):
        st.markdown(line)
        if isinstance(seen, str) and seen:  # what the instance showed: value, baseline, error (the webhook's text)
            st.caption(widgets.plain(seen))


def show_misroutes(flt: TraceFilter) -> None:
    """Recent feedback saying the routing was wrong, each linked to its drill-down."""
    st.subheader("Recent misroutes", help="A misroute is a request whose feedback said the routing was wrong "
                 "(`correct=false`), here newest first with its verdict.")
    try:
        found = fetch_misroutes(flt.model_dump_json())
    except SinkError as exc:
        st.caption(f"Misroutes unavailable: {exc}.")
        return
    if found is None:
        st.caption("Misroutes unavailable: this store has no misroute query yet.")
        return
    rows = data.misroute_rows([Misroute.model_validate(m) for m in found])
    if rows.empty:
        st.caption("No feedback marked a request of the window as misrouted.")
    else:
        st.dataframe(rows, hide_index=True, column_config=OPEN, height=HEAD_PX + ROW_PX * len(rows),
                     row_height=ROW_PX)


@st.fragment(run_every=REFRESH_S)
def live(scope: sidebar.Scope) -> None:
    """Everything below the title, refreshed every few seconds over a window ending now."""
    # Reruns within a refresh share the cache; the window ends LAG_S back, so traces still on their
    # way to the store (the emitter batches them) land in the next window, not between two queries.
    end = fleet_data.floor_time(datetime.now(UTC) - timedelta(seconds=LAG_S), REFRESH_S)
    span = scope.end - scope.start
    sc = dataclasses.replace(scope, start=end - span, end=end)
    flt, before = sc.trace_filter(), sc.trace_filter().model_copy(update={"start": sc.start - span, "end": sc.start})
    lim = load_limits()
    try:
        current = data.series((BucketStats.model_validate(b) for b in fetch_buckets(flt.model_dump_json(), sc.bucket)),
                              sc.start, sc.end, sc.bucket)
        previous = data.series(BucketStats.model_validate(b) for b in fetch_buckets(before.model_dump_json(),
                                                                                     sc.bucket))
        edges = [TrafficEdge.model_validate(e) for e in fetch_traffic(flt.model_dump_json())]
        own = windows(flt, before)
    except SinkUnavailable as exc:
        st.error(f"Trace store unreachable: {exc}")
        return
    except SinkError as exc:
        st.error(f"The trace store could not answer: {exc}")
        return
    if not current["requests"].sum() and previous.empty:
        st.info("No traffic in this window yet. Point any OpenAI client at the gateway (model `auto`); "
                "every request gets a trace:")
        st.code(data.SEND_TRAFFIC, language="python")
        show_alerts(sc.window)
        return
    clock = "%Y-%m-%d %H:%M" if span >= timedelta(days=1) else "%H:%M"  # 24h and 7d: the same hour, other days
    was = f"{sc.start - span:{clock}} – {sc.start:{clock}}"
    st.caption(f"{sc.start:%Y-%m-%d %H:%M} – {sc.end:{clock}} UTC. " + (
        f"Beside each figure: its change against the {sc.window} before ({was}) and the value then."
        if not previous.empty else f"The {sc.window} before ({was}) had no traffic: there is nothing to compare with."))
    heads = data.headlines(current, previous, lim.cost_unit,
                           None if own is None else (own[0], own[1]))
    # Two rows: traffic, errors, fallbacks and cost; then latency (seven across truncate the values).
    cols = [*st.columns(4), *st.columns(4)[:3]]
    for col, h in zip(cols, [*heads[:3], heads[6], *heads[3:6]], strict=True):
        col.metric(h.label, h.text, h.delta_text, delta_color="inverse" if h.worse_up else "normal",
                   help=h.help or None)
    st.plotly_chart(charts.overview_chart(current, sc.bucket, sc.start, sc.end, lim.cost_unit), key="overview_chart")
    left, right = st.columns(2)
    for column, by in ((left, "rule"), (right, "model")):
        with column:
            table = data.busiest(edges, by)
            if table.empty:
                st.caption(f"No {by} served requests in the window.")
            else:
                st.plotly_chart(charts.busiest_chart(table, by))
    show_misroutes(flt)
    show_alerts(sc.window)


scope = sidebar.scope()
st.title("Overview")
live(scope)
