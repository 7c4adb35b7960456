"""Experiments: two arms or router versions over the sidebar's window — the metric table with intervals and
the split check, per-side time series, and the live → shadow flip matrix (thin page; data from
app.ui.data.experiments, pictures from app.ui.charts.experiments)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import streamlit as st

from app.cli.compare import designed_shares
from app.config import load_config
from app.ui import resources, sidebar
from app.ui.charts import experiments as charts
from app.ui.data import experiments as data
from app.ui.data.misroute import config_path
from app.ui.data.topology import parse_url_time
from app.ui.limits import load_limits
from app.ui.timeseries import bucket_label, finer_bucket
from ingest import SinkError, SinkUnavailable, assumed_even_split
from schemas.errors import ConfigError
from schemas.experiments import CompareBy
from schemas.queries import AggregateQuery, BucketStats, TraceFilter

REFRESH_S = 10
SAMPLES = (100, 200, 500)


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def fetch_groups(by: str, start: str, end: str) -> dict[str, int] | None:
    """Requests per arm or version in the window; None when the store cannot group them."""
    method = getattr(resources.get_store(), "experiment_groups", None)
    if method is None:
        return None
    return dict(method(by, datetime.fromisoformat(start), datetime.fromisoformat(end)))


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def fetch_shares(by: str, a: str, b: str) -> tuple[float, float] | None:
    """The shares A and B were designed to get, from the running configuration's ``experiments.arms`` (None: unknown).

    By arm or by the versions the arms run (:func:`app.cli.compare.designed_shares`); a configuration
    that does not load is no design.
    """
    path = config_path()
    if path is None:
        return None
    try:
        experiments = load_config(path).experiments
    except (ConfigError, OSError):
        return None
    return designed_shares(experiments, by, a, b)


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def fetch_compare(a: str, b: str, by: str, start: str, end: str,
                  shares: tuple[float, float] | None = None) -> dict[str, Any] | None:
    """The comparison report as JSON, its split checked against ``shares`` (None: unknown, assumed 50/50 and said).

    None when the store does not compare.
    """
    from schemas.experiments import CompareQuery

    method = getattr(resources.get_store(), "compare", None)
    if method is None:
        return None
    query = CompareQuery(a=a, b=b, by=by, start=datetime.fromisoformat(start), end=datetime.fromisoformat(end),
                         shares=shares or (0.5, 0.5))
    report = method(query)
    return dict((report if shares is not None else assumed_even_split(report)).model_dump(mode="json"))


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def fetch_series(by: str, a: str, b: str, flt: str, bucket: str) -> dict[str, list[dict[str, Any]]]:
    """Each side's time buckets within one filter (JSON of a TraceFilter), ``by`` arm or version.

    Requests forced onto an arm by header are left out, as ``compare`` leaves them out.
    """
    query = AggregateQuery(filter=TraceFilter.model_validate_json(flt), bucket=bucket)
    series = resources.get_store().experiment_series(cast(CompareBy, by), a, b, query)  # a key of data.BY_FIELD
    return {side: [x.model_dump(mode="json") for x in buckets] for side, buckets in series.items()}


@st.cache_data(ttl=REFRESH_S, show_spinner=False)
def fetch_shadow_sample(flt: str, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` traces of one filter, reduced to their live choice and shadow decision.

    One search: its summaries carry the shadow decision (a ``get`` per trace took 2-3 s for 200 at 10M traces).
    """
    page = resources.get_store().search(TraceFilter.model_validate_json(flt), limit=limit)
    return [item.model_dump(mode="json", include={"request_id", "selected_model", "selected_instance", "shadow"})
            for item in page.items]


def synced(key: str, default: str) -> str:
    """The URL's ``?<key>=`` on a session's first run, the widget's value after (see app.ui.sidebar)."""
    if key not in st.session_state:
        st.session_state[key] = st.query_params.get(key, default)
    return str(st.session_state[key])


def metric_section(a: str, b: str, by: str, sc: sidebar.Scope) -> None:
    st.subheader("Metrics")
    try:
        report = fetch_compare(a, b, by, sc.start.isoformat(), sc.end.isoformat(), fetch_shares(by, a, b))
    except SinkError as exc:
        st.warning(f"Comparison not available: {exc}")
        return
    except ValueError as exc:
        st.warning(f"Comparison not available: {exc}")
        return
    if report is None:
        st.info("Comparison not available: this store does not answer `GET /v1/analytics/compare` yet.")
        return
    level, sentence = data.srm_status(report)
    {"error": st.error, "warning": st.warning, "info": st.info, "ok": st.success}[level](sentence)
    # Only the p-values are Holm-adjusted (ingest.experiments.compare.build_report): an interval can
    # exclude 0 while p (Holm) is above alpha, and "moved" stays blank.
    st.markdown(f"**{report.get('verdict', '')}** — A = `{a}`, B = `{b}`; {report.get('confidence', 0.95):.0%} "
                "intervals per metric; p-values Holm-corrected across the metrics.")
    st.dataframe(data.metric_table(report, load_limits().cost_unit), hide_index=True, key="metric_table",
                 column_config={"note": st.column_config.TextColumn("note", width="large")})
    st.caption(data.FIGURES_NOTE)


def series_section(a: str, b: str, by: str, sc: sidebar.Scope) -> None:
    st.subheader("Over time")
    # Both sides within the sidebar's scope; the compared field is the sides' own.
    flt = sc.trace_filter(**{data.BY_FIELD[by]: None})

    def buckets(f: TraceFilter, bucket: str) -> dict[str, list[BucketStats]]:
        got = fetch_series(by, a, b, f.model_dump_json(), bucket)
        return {side: [BucketStats.model_validate(x) for x in got[side]] for side in (a, b)}

    try:
        per_side = buckets(flt, sc.bucket)
    except SinkError as exc:  # e.g. an older server, without GET /v1/analytics/experiment-series
        st.warning(f"Series not available: {exc}")
        return
    first = data.first_start(per_side)
    if first is None:
        st.info(f"Neither side served a request in the last {sc.window}.")
        return
    # The bucket follows the span that holds data: a 24 h window over an hour of traffic gets minutes.
    start = max(sc.start, first)
    bucket = finer_bucket(sc.bucket, sc.end - start)
    if bucket != sc.bucket:
        per_side = buckets(flt.model_copy(update={"start": start}), bucket)
        start = max(start, data.first_start(per_side) or start)  # the first fine bucket with traffic
        st.caption(f"No traffic on either side before {start:%Y-%m-%d %H:%M} UTC: the chart starts there, in "
                   f"{bucket_label(bucket)} buckets.")
    frame = data.series(per_side, start, sc.end, bucket)
    st.plotly_chart(charts.series_chart(frame, bucket, start, sc.end, load_limits().cost_unit), key="series")


def shadow_section(sc: sidebar.Scope) -> None:
    st.subheader("Shadow decisions")
    synced("sample", str(SAMPLES[1]))
    if st.session_state["sample"] not in [str(s) for s in SAMPLES]:
        st.session_state["sample"] = str(SAMPLES[1])
    sample = int(st.radio("newest traces read", [str(s) for s in SAMPLES], key="sample", horizontal=True))
    sidebar.sync_param("sample", None if sample == SAMPLES[1] else str(sample))
    traces = fetch_shadow_sample(sc.trace_filter().model_dump_json(), sample)
    pairs = data.shadow_pairs(traces)
    st.caption(data.shadow_summary(pairs, len(traces)))
    if not pairs.empty:
        level = str(st.radio("grid by", ["model", "instance"], key="flip_level", horizontal=True))
        st.plotly_chart(charts.flip_heatmap(data.flip_matrix(pairs, level), f"Live → shadow, by {level}"),
                        key="flips")
        st.caption("For the whole window under any policy file: `routelens replay --since … --until … --policy FILE`.")


st.title("Experiments")
st.caption("Two arms or router versions side by side: metrics with intervals and the split check, traffic over "
           "time, and where a shadow policy would have routed differently.")
pinned = parse_url_time(st.query_params.get("end"))
now = pinned or datetime.now(UTC).replace(microsecond=0)
scope = sidebar.scope(now=now, default_window="24h")
if pinned is not None:
    st.caption(f"Window pinned to end at {pinned.isoformat()} (`?end=`).")

synced("by", "arm")
if st.session_state["by"] not in data.BY_FIELD:
    st.session_state["by"] = "arm"
by = str(st.radio("Compare", list(data.BY_FIELD), key="by", horizontal=True))
sidebar.sync_param("by", None if by == "arm" else by)

try:
    groups = fetch_groups(by, scope.start.isoformat(), scope.end.isoformat())
    if groups is None:
        groups = {}
        st.info("This store does not list arms or versions (`experiment_groups`); name them below.")
except SinkUnavailable as exc:
    st.error(f"Trace store unreachable: {exc}")
    st.stop()
except (SinkError, TypeError, KeyError, ValueError) as exc:  # a server from before the experiments API
    st.warning(f"This store does not answer experiment queries (arms and versions per window): {exc}")
    groups = {}

options, default_a, default_b = data.pick_sides(groups, st.query_params.get("a"), st.query_params.get("b"))
if groups and (missing := data.missing_sides(groups, st.query_params.get("a"), st.query_params.get("b"), by)):
    st.warning(missing)
if len(options) < 2:
    st.info(data.NO_EXPERIMENT)
    if groups:
        st.caption("In this window: " + ", ".join(f"`{g}` ({n:,})" for g, n in groups.items()))
    st.stop()
left, right = st.columns(2)
with left:
    side_a = st.selectbox(f"{by} A", options, index=options.index(default_a) if default_a else 0, key="side_a")
with right:
    side_b = st.selectbox(f"{by} B", options, index=options.index(default_b) if default_b else 1, key="side_b")
sidebar.sync_param("a", side_a)
sidebar.sync_param("b", side_b)
if side_a == side_b:
    st.warning("Pick two different values.")
    st.stop()
assert side_a is not None and side_b is not None
try:
    metric_section(side_a, side_b, by, scope)
    series_section(side_a, side_b, by, scope)
    shadow_section(scope)
except SinkError as exc:
    st.error(f"The trace store could not answer: {exc}")
