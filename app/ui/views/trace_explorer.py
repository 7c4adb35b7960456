"""Why this model: one decision trace, looked up by request_id (thin page; data from app modules)."""

import streamlit as st

from app import explain
from app.ui import resources, widgets
from app.ui.charts.score_terms import score_terms_chart
from app.ui.data import trace_tables
from ingest import SinkError

st.title("Why this model")
st.caption("Look up one routing decision by request_id: what the router saw, ruled out, scored and chose.")

request_id = widgets.request_id_input()
if not request_id:
    st.info("Enter the request_id of a decision (the `x-request-id` the gateway returned).")
    st.stop()

try:
    trace = resources.load_trace(request_id)
except SinkError as exc:
    st.error(f"Trace source unreachable: {exc}")
    st.stop()
if trace is None:
    st.warning(f"No trace found for request_id {request_id!r}. Check the id, or wait for the trace to be written.")
    st.stop()

facts = trace_tables.summary(trace)
st.markdown(f"### Selected `{trace.selected_model or '—'}` → `{trace.selected_instance or '—'}`")
st.caption(
    f"{facts['ts']} · rule {facts['rule']} · intent {facts['intent']} · arm {facts['experiment_arm']} · "
    f"router {facts['router_version']} · policy {facts['policy_hash']}"
)
for column, (label, value) in zip(st.columns(5), trace_tables.headline(trace).items(), strict=True):
    column.metric(label, value)
if trace.fallback_triggered:
    st.warning(f"Fallback: {trace.fallback_reason or 'no reason recorded'}")

st.subheader("Candidates")
st.caption("Best first. Score columns are weighted terms (raw × weight); gauges are the state seen at decision time.")
st.dataframe(trace_tables.candidates_frame(trace), hide_index=True)
terms = trace_tables.score_terms_frame(trace)
if not terms.empty:
    st.plotly_chart(score_terms_chart(terms))
rejected = trace_tables.rejections(trace)
if rejected:
    st.markdown("**Ruled out**")
    for instance, why in rejected.items():
        st.markdown(f"- :red[**REJECTED**] `{instance}`: {why}")

st.subheader("Decision steps")
st.dataframe(trace_tables.steps_frame(trace), hide_index=True)

st.subheader("Attempts")
st.dataframe(trace_tables.attempts_frame(trace), hide_index=True)

with st.expander("Request features"):
    st.json(explain.features_summary(trace))
with st.expander("Raw trace JSON"):
    st.json(trace.model_dump(mode="json"), expanded=False)
