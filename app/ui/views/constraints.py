"""Constraints: each latch's state per instance now, when latches went out and came back over the window,
and how often each constraint removed a candidate and how often that removal was decisive
(thin page; data from app.ui.data.constraints, pictures from app.ui.charts.constraints)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import streamlit as st

from app import reader
from app.ui import resources, sidebar
from app.ui.charts import constraints as charts
from app.ui.data import big_fleet
from app.ui.data import constraints as data
from app.ui.data import fleet as fleet_data
from app.ui.data.topology import SCOPE_PARAMS, decisions_link, parse_url_time
from app.ui.limits import load_limits
from app.units import DASH, count, fmt
from ingest import MAX_LIMIT, SinkError
from schemas.queries import ConstraintStat, TraceFilter
from schemas.records import RouterEvent

STATE_EVERY_S, HISTORY_EVERY_S = 5, 15
CHUNKS = 24  # spans a window's snapshots are first read in, when the store cannot compute intervals
READ_BUDGET = 120  # snapshot pages read at most for one window (120,000 snapshots)
SEND_TRAFFIC = ("Send traffic to see constraints bind: `routelens demo` runs a fleet with traffic, or point clients "
                "at `routelens serve` (`POST /v1/chat/completions`).")


@st.cache_data(ttl=STATE_EVERY_S, show_spinner=False)
def fetch_state() -> Any:
    """``GET /v1/router/state`` of the live gateway; None when the app reads a file and names no gateway.

    The gateway the Fleet and Overview pages read (``ROUTELENS_LIVE_URL`` while the store is a file).
    """
    server = fleet_data.live_api()
    return None if server is None else reader.fetch_json(server[0], "/v1/router/state", server[1])


@st.cache_data(ttl=HISTORY_EVERY_S, show_spinner=False)
def fetch_intervals(start: datetime, end: datetime, instance: str | None) -> tuple[pd.DataFrame, int, str | None]:
    """Latch out-intervals of the window, how many snapshots they come from, and a note when some are missing.

    The store computes them (``latch_intervals``: one query over its snapshots, however many the
    window holds). A store without it (Elasticsearch, an older server) is read snapshot by snapshot
    (:func:`app.ui.data.constraints.read_whole`, at most :data:`READ_BUDGET` pages). The intervals are
    cached, not the snapshots: dumping 24,000 snapshots to JSON for the cache and validating them
    again on every rerun took longer than reading them.
    """
    store = resources.get_store()
    compute = getattr(store, "latch_intervals", None)
    answer = None if compute is None else compute(start, end, instance)
    if answer is not None:
        frame = data.intervals_frame([i.model_dump() for i in answer.intervals], start, end)
        note = (f"Only the newest {count(len(frame), 'interval')} of the window are shown: name an instance or "
                "shorten the window." if answer.truncated else None)
        return frame, int(answer.snapshots), note
    snaps, cut = data.read_whole(lambda lo, hi: store.snapshots(lo, hi, instance=instance, limit=MAX_LIMIT),
                                 start, end, parts=CHUNKS, page=MAX_LIMIT, budget=READ_BUDGET)
    note = (f"The window holds more snapshots than {READ_BUDGET} reads take in: intervals in {count(cut, 'part')} of "
            "it may be missing; name an instance or shorten the window." if cut else None)
    return data.latch_intervals(snaps, start, end), len(snaps), note


@st.cache_data(ttl=HISTORY_EVERY_S, show_spinner=False)
def fetch_latch_events(start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Router events of kind ``latch`` in the window."""
    return [e.model_dump(mode="json") for e in resources.get_store().events(start, end, kind="latch")]


@st.cache_data(ttl=HISTORY_EVERY_S, show_spinner=False)
def fetch_served(start: datetime, end: datetime) -> list[tuple[str, str]]:
    """``(model, instance)`` of the window's traffic: whether any request came."""
    edges = resources.get_store().traffic(TraceFilter(start=start, end=end))
    return sorted({(e.model, e.instance) for e in edges if e.model and e.instance})


@st.cache_data(ttl=HISTORY_EVERY_S, show_spinner=False)
def fetch_constraint_stats(flt: str) -> list[dict[str, Any]] | None:
    """Constraint removals of one filter (JSON of a TraceFilter); None while the store does not answer them."""
    method = getattr(resources.get_store(), "constraint_stats", None)
    if method is None:
        return None
    return [s.model_dump(mode="json") for s in method(TraceFilter.model_validate_json(flt))]


def window_end(pinned: datetime | None, step: int) -> datetime:
    """The pinned ``?end=``, else now floored to ``step`` seconds (one cache key per step)."""
    if pinned is not None:
        return pinned
    now = datetime.now(UTC)
    return now.replace(microsecond=0, second=now.second - now.second % step)


st.title("Constraints")
st.caption("Hard constraints hold an instance out of the feasible set through a hysteresis latch: "
           "red is out, green in.")
pinned = parse_url_time(st.query_params.get("end"))
scope = sidebar.scope(now=window_end(pinned, HISTORY_EVERY_S))


@st.fragment(run_every=STATE_EVERY_S)
def state_now() -> None:
    """Each latch per instance, as the gateway holds it now."""
    st.subheader("Now")
    try:
        payload = fetch_state()
    except SinkError as exc:
        st.warning(f"Live latch state unavailable: {exc}")
        return
    if payload is None:
        st.info("Live latch state needs a server: the app reads a trace file (`routelens app --api URL`, or "
                "ROUTELENS_LIVE_URL naming a gateway).")
        return
    rows = data.state_rows(payload if isinstance(payload, dict) else None, load_limits())
    everything = len(rows)
    if scope.model:
        rows = rows[rows["model"] == scope.model]
    if scope.instance:
        rows = rows[rows["instance"] == scope.instance]
    if rows.empty:
        st.info(f"No latch {data.scope_words(scope.model, scope.instance)} in the gateway's state; it reports "
                f"{count(everything, 'latch', 'latches')} in all." if everything and (scope.model or scope.instance)
                else "The gateway reports no latches yet (no instance scraped, or no hard constraint configured).")
        return
    out = rows[rows["state"] == "out"]
    st.caption(f"{len(out)} of {count(len(rows), 'latch', 'latches')} out on {out['instance'].nunique()} of "
               f"{count(rows['instance'].nunique(), 'instance')}.")
    drawn, quiet = big_fleet.latches_to_draw(rows)
    if quiet:
        st.caption(f"Drawn: the instances with a latch out or stale state; {count(quiet, 'instance')} with every "
                   "latch in are left to the latch table.")
    if not drawn.empty:
        st.plotly_chart(charts.state_chart(drawn), key="state_chart")
    with st.expander("Latch table"):
        st.dataframe(data.latch_table(rows), hide_index=True)


@st.fragment(run_every=None if pinned else HISTORY_EVERY_S)
def history() -> None:
    """Out-intervals and binding counts over the window (moving with the clock unless pinned)."""
    end = window_end(pinned, HISTORY_EVERY_S)
    sc = dataclasses.replace(scope, start=end - (scope.end - scope.start), end=end)
    try:
        intervals, read, note = fetch_intervals(sc.start, sc.end, sc.instance)
        events = [RouterEvent.model_validate(e) for e in fetch_latch_events(sc.start, sc.end)]
        # The sidebar's model and instance name the removed candidate here, not the selected one.
        raw_stats = fetch_constraint_stats(sc.trace_filter(model=None, instance=None).model_dump_json())
    except SinkError as exc:
        st.error(f"Trace store unreachable: {exc}")
        return
    st.subheader(f"Out-intervals · last {sc.window}")
    if sc.instance:
        events = [e for e in events if e.instance == sc.instance]
    marks = data.latch_events(events, set(intervals["constraint"]))
    # each interval carries its instance's model from the snapshot that began it, each event its own
    intervals, marks = data.of_model(intervals, sc.model), data.of_model(marks, sc.model)
    narrowed = data.scope_words(sc.model, sc.instance)
    if intervals.empty:
        st.info(f"No latch {narrowed} went out in the window." if narrowed and read else
                "No latch went out in the window." if read else
                f"No snapshot {narrowed} in the window." if narrowed else
                f"No instance snapshots in the window. {SEND_TRAFFIC}")
    else:
        if note:
            st.caption(note)
        drawn, hidden = big_fleet.longest_out(intervals)
        if hidden:
            st.caption(f"Drawn: the {big_fleet.CHART_ROWS} latches out longest; {count(hidden, 'other')} are in the "
                       "intervals table.")
            rows_drawn = set(zip(drawn["instance"], drawn["constraint"], strict=True))
            marks = marks[[(i, c) in rows_drawn for i, c in zip(marks["instance"], marks["constraint"], strict=True)]]
        st.plotly_chart(charts.timeline_chart(drawn, sc.start, sc.end, marks), key="timeline_chart")
        with st.expander("Intervals"):
            st.dataframe(data.interval_table(intervals, load_limits()), hide_index=True)
    if not marks.empty:
        with st.expander(f"Latch events ({len(marks)})"):
            st.dataframe(marks.fillna(DASH), hide_index=True)

    st.subheader("Binding counts")
    if raw_stats is None:
        st.info("This store does not answer constraint stats yet (`GET /v1/analytics/constraints`).")
        return
    stats = [s for s in (ConstraintStat.model_validate(r) for r in raw_stats)
             if sc.model in (None, s.model) and sc.instance in (None, s.instance)]
    counts = data.binding_counts(stats)
    if counts.empty:
        narrowed = data.scope_words(sc.model, sc.instance)
        try:
            quiet = bool(raw_stats) or bool(fetch_served(sc.start, sc.end))  # traffic came: none was removed
        except SinkError:
            quiet = False
        st.info(f"No constraint removed or scaled a candidate {narrowed} in the window." if narrowed and raw_stats
                else "No constraint removed or scaled a candidate in the window." if quiet
                else f"No constraint removed or scaled a candidate in the window. {SEND_TRAFFIC}")
        return
    if sc.model or sc.instance:
        st.caption("Counted on the removed candidate's model and instance (the sidebar's choice).")
    undecided = int(counts["undecided"].sum())
    st.caption(f"{count(int(counts['removed'].sum()), 'removal')}, {int(counts['decisive'].sum()):,} decisive (the "
               "removed candidate would have won)" + (f"; {undecided:,} undecided: no score terms were recorded for "
                                                      "the removed candidate" if undecided else "") + ".")
    st.plotly_chart(charts.binding_chart(counts), key="binding_chart")
    base = {k: st.query_params.get(k) for k in SCOPE_PARAMS}
    with st.expander("Per constraint and instance"):
        st.dataframe(counts.assign(decisive_share=[fmt(v, "%") for v in counts["decisive_share"]],
                                   decisions=[decisions_link(base, violation=c) for c in counts["constraint"]]),
                     hide_index=True, column_config={
                         "decisions": st.column_config.LinkColumn("decisions", display_text="decisions ›")})
        st.dataframe([s.model_dump() for s in stats], hide_index=True)


state_now()
history()
