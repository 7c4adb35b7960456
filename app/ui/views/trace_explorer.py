"""Why this model: one decision explained, sentence first, then pictures, tables on demand (``?request_id=``)."""

import urllib.parse
from typing import Any

import streamlit as st

from app import explain
from app.ui import probe_traffic, resources, widgets
from app.ui.charts.attempts import attempts_chart
from app.ui.charts.score_terms import score_terms_chart
from app.ui.charts.waterfall import waterfall_chart
from app.ui.data import big_fleet, policy_step, trace_tables, why, why_not
from app.ui.data.ids import request_id_problem
from app.ui.data.waterfall import waterfall_stages
from app.ui.misroute_form import misroute_section
from ingest import SinkError
from schemas.feedback import Feedback


@st.cache_data(ttl=2, show_spinner=False)
def fetch_feedback(request_id: str) -> list[dict[str, Any]] | None:
    """The verdicts recorded on the request, oldest first; None when the store has no such read."""
    read = getattr(resources.get_store(), "feedback", None)
    return None if read is None else [f.model_dump(mode="json") for f in read(request_id)]


def verdicts_of(request_id: str) -> tuple[list[Feedback], str | None]:
    """The verdicts on the request, and why they could not be read (None: they were)."""
    try:
        found = fetch_feedback(request_id)
    except (SinkError, ValueError) as exc:  # unreachable, or a record that is not a verdict
        return [], str(exc)
    if found is None:
        return [], "this store has no feedback read"
    return [Feedback.model_validate(f) for f in found], None


st.title("Why this model")
st.caption("One routing decision: what the router saw, ruled out, scored and chose, and what would have changed it.")

request_id = widgets.request_id_input()
if not request_id:
    st.info("Enter the request_id of a decision (the x-request-id the gateway returned) or its OpenTelemetry "
            "trace id, or open one from Decisions.")
    st.stop()
if (problem := request_id_problem(request_id)) is not None:
    st.warning(problem)
    st.stop()
try:
    trace = resources.load_trace(request_id)
except SinkError as exc:
    st.error(widgets.plain(f"Trace source unreachable: {exc}"))
    st.stop()
if trace is None:
    st.warning("No trace found for this request_id or trace id. Check the id, or wait for the trace to be written.")
    st.code(request_id, language=None)
    st.stop()

with st.container(border=True):
    st.text(why.decision_sentence(trace))
for column, (label, value) in zip(st.columns(5), trace_tables.headline(trace).items(), strict=True):
    column.metric(label, value)
if trace.fallback_triggered:
    st.warning(widgets.plain(f"Fallback: {trace.fallback_reason or 'no reason recorded'}"))
verdicts, unread = verdicts_of(trace.request_id)
for verdict in verdicts:  # what the feedback on this request said (a misroute, or that it was right)
    (st.success if verdict.correct else st.warning)(widgets.plain(f"Feedback: {explain.verdict_text(verdict)}"))
st.markdown(f"[Compare with another request or policy](diff?a={urllib.parse.quote(trace.request_id, safe='')})")
if trace.otel_trace_id:
    st.caption(f"OpenTelemetry trace id: `{trace.otel_trace_id}` (the request span: `{trace.otel_span_id}`)")

st.subheader("Elimination")
st.plotly_chart(waterfall_chart(waterfall_stages(trace)), key="waterfall")
rejected = trace_tables.rejections(trace)
if rejected:
    widgets.table([{"instance": i, "ruled out by": why_} for i, why_ in rejected.items()])

st.subheader("Scores")
terms = trace_tables.score_terms_frame(trace)
if terms.empty:
    st.text("No candidate was scored.")
else:
    drawn, left_out = big_fleet.top_scored(terms, keep=(trace.selected_instance,))
    if left_out:
        st.caption(f"The {drawn['instance'].nunique()} best-scored candidates (and the one chosen) of "
                   f"{terms['instance'].nunique()}; the tables below hold every one.")
    st.plotly_chart(score_terms_chart(drawn), key="score_terms")
if (flip := why.flip_sentence(trace)) is not None:
    st.text(flip)
widgets.table(trace_tables.ranking_frame(trace))
with st.expander("Score terms: raw value × weight"):
    widgets.table(terms)

if losers := why_not.reasons_rows(trace):
    st.subheader("Why not the others")
    st.caption("One reason for each candidate not chosen: its rule's target, a constraint, a failed attempt, "
               "the sampling draw, the tie-break, or the score term it lost most on.")
    widgets.table(losers)

st.subheader("State snapshot")
st.caption("The gauges each candidate was judged on, as scraped before the decision.")
widgets.table(trace_tables.state_frame(trace))

probe_traffic.verdicts_section(trace.selected_instance, trace.ts)

st.subheader("Attempts")
attempts = trace_tables.attempts_frame(trace)
if attempts.empty:
    st.text("The request was not forwarded.")
else:
    st.plotly_chart(attempts_chart(attempts), key="attempts")
    widgets.table(attempts)
if passed := explain.after_pick(trace):  # instances passed over (a breaker refused them), a trial sent first
    widgets.table([{"step": s.step, "what happened": s.reason or explain.DASH} for s in passed])
if explain.served_by(trace) is None and trace.candidates:
    st.text(f"No instance served the request: {explain.unserved_text(trace)}.")

if (step := trace.policy) is not None:
    st.subheader("Routing rule")
    st.text(policy_step.rule_sentence(step))
    if step.tried:
        st.caption("Each rule tried, in order: the one that matched with every atom's verdict, the others with "
                   "the atom that failed them first and the value it read.")
        widgets.table(policy_step.clauses_rows(step))
    if (intent := policy_step.intent_sentence(step)) is not None:
        st.text(intent)
    if step.keyword_score is not None:
        st.text(f"Keyword score {explain.fmt_num(step.keyword_score)}"
                + (":" if step.keywords else " (no pattern matched)."))
        if step.keywords:
            widgets.table(policy_step.keyword_rows(step))
    if step.attachments:
        if any(a.mismatch for a in step.attachments):
            st.warning("An attachment's bytes are not the type it was declared as: it was routed by its bytes.")
        widgets.table(policy_step.attachments_rows(step))

st.subheader("Policy")
facts = trace_tables.summary(trace)
policy = {k: facts[k] for k in ("rule", "intent", "experiment_arm", "router_version", "policy_hash", "ts")}
policy_steps = [s.reason for s in trace.decision_trace if s.kind.value in ("policy", "pick") and s.reason]
policy["policy and pick steps"] = " · ".join(policy_steps) or explain.DASH
policy["weights"] = ", ".join(f"{w.name} {explain.fmt_num(w.weight)}" for w in trace.score_weights) or explain.DASH
widgets.table([{"field": k, "value": v} for k, v in policy.items()])
with st.expander("Decision steps"):
    widgets.table(trace_tables.steps_frame(trace))
with st.expander("Request features"):
    st.json(explain.features_summary(trace))
with st.expander("Raw trace JSON"):
    st.json(trace.model_dump(mode="json"), expanded=False)

if verdicts:
    st.caption("This request has a verdict already (above): the gateway takes one per request and refuses a "
               "second (409), so it is not offered to mark it as a misroute.")
else:
    if unread is not None:
        st.caption(widgets.plain(f"The feedback on this request could not be read ({unread}): a verdict may be "
                                 "recorded already, and the gateway would refuse a second one (409)."))
    misroute_section(trace)
