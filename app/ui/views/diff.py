"""Decision diff: two requests side by side (``?a=ID&b=ID``), or one re-decided under another policy."""

import pandas as pd
import streamlit as st

from app.ui import resources, widgets
from app.ui.charts.score_terms import score_terms_chart
from app.ui.data import diff, trace_tables, why
from app.ui.data.diff_verdict import diff_verdict
from app.ui.data.ids import request_id_problem
from app.ui.data.misroute import config_path
from app.ui.sidebar import sync_param
from app.units import count
from ingest import SinkError
from schemas import ConfigError, DecisionTrace, RoutelensError

st.title("Decision diff")
st.caption("Candidates aligned by instance; rows, terms and facts that differ are highlighted.")

MODES = ["another request", "another policy"]
if "diff_mode" not in st.session_state:
    st.session_state.diff_mode = MODES[1] if st.query_params.get("policy") else MODES[0]


def _load(side: str, request_id: str) -> DecisionTrace | None:
    """The trace of one side, or None after saying why there is none."""
    if not request_id:
        st.info(f"Enter request {side}'s request_id.")
        return None
    if (problem := request_id_problem(request_id)) is not None:
        st.warning(f"Request {side}: {problem}")
        return None
    try:
        trace = resources.load_trace(request_id)
    except SinkError as exc:
        st.error(widgets.plain(f"Trace source unreachable: {exc}"))
        return None
    if trace is None:
        st.warning(f"No trace found for request {side}'s request_id.")
        st.code(request_id, language=None)
    return trace


# The reasons are prose (up to ~200 characters): they get a table of their own that wraps, so the
# grid of verdicts and numbers fits the main column at 1400 px (~940 px) without scrolling sideways.
WHY = {"why_a": "why not chosen in A", "why_b": "why not chosen in B"}
_VERDICT_PX, _NUMBER_PX = 236, 56  # a verdict as long as "not filtered or scored (rule's chain)"; "total A"
_LABELS = {"instance": "instance", "verdict_a": "verdict A", "verdict_b": "verdict B", "rank_a": "rank A",
           "rank_b": "rank B", "total_a": "total A", "total_b": "total B", "delta": "delta"}
CANDIDATE_COLUMNS = {
    **{c: st.column_config.Column(label, width=104 if c == "instance" else _VERDICT_PX if c.startswith("verdict")
                                  else _NUMBER_PX) for c, label in _LABELS.items()},
    "differs": st.column_config.CheckboxColumn("differs", width=_NUMBER_PX),
}


def _reasons(cands: pd.DataFrame) -> "pd.io.formats.style.Styler":
    """Why each instance was not chosen on either side, as prose that wraps, shaded as the grid is."""
    shown = widgets.readable(cands[["instance", *WHY]]).map(lambda v: widgets.plain(str(v)))
    shade = ["background-color: #fff3cd" if d else "" for d in cands["differs"]]
    return shown.rename(columns=WHY).style.apply(lambda col: shade, axis=0)


def _highlight(frame: pd.DataFrame) -> "pd.io.formats.style.Styler":
    """Shade the rows whose ``differs`` is set."""
    return frame.style.apply(lambda row: ["background-color: #fff3cd" if row["differs"] else ""] * len(row), axis=1)


left, right = st.columns(2)
with left:
    a_id = widgets.request_id_input(key="a", label="request A")
with right:
    mode = st.radio("compare with", MODES, key="diff_mode", horizontal=True)
    if mode == MODES[0]:
        b_id = widgets.request_id_input(key="b", label="request B")
        sync_param("policy", None)
    else:
        st.session_state.setdefault("diff_policy", st.query_params.get("policy", ""))
        path = st.text_input("policy file (routelens.yaml or a routing policy)", key="diff_policy",
                             help="As `routelens replay --policy` reads it; a relative path is taken from the "
                                  "configuration's folder.").strip()
        sync_param("policy", path or None)
        upload = st.file_uploader("or upload a policy YAML", type=["yaml", "yml", "json"], key="diff_upload")

a = _load("A", a_id)
if a is None:
    st.stop()
if mode == MODES[0]:
    b = _load("B", b_id)
else:
    b = None
    base = config_path()
    try:
        if upload is not None:
            b = diff.replay_yaml(a, upload.getvalue().decode("utf-8"), upload.name, base)
        elif path:
            b = diff.replay_file(a, diff.policy_path(path, base), base)
        else:
            st.info("Name a policy file or upload one to re-decide request A under it.")
            st.stop()
    except ConfigError as exc:
        st.warning(widgets.plain(f"That policy is not valid: {exc}"))
    except (ValueError, UnicodeDecodeError, RoutelensError) as exc:
        st.warning(widgets.plain(f"Cannot use that policy: {exc}"))
if b is None:
    st.stop()

with st.container(border=True):
    st.text(diff_verdict(a, b))
col_a, col_b = st.columns(2)
for col, side, trace in ((col_a, "A", a), (col_b, "B" if mode == MODES[0] else "B (replayed)", b)):
    with col:
        st.markdown(f"**{side}**")
        st.text(why.decision_sentence(trace))
        terms = trace_tables.score_terms_frame(trace)
        if not terms.empty:
            st.plotly_chart(score_terms_chart(terms), key=f"terms_{side}")

cands = diff.align(a, b)
st.subheader("Candidates")
st.caption(f"{int(cands['differs'].sum())} of {count(len(cands), 'candidate')} differ.")
st.dataframe(_highlight(widgets.readable(cands)), hide_index=True, column_config=CANDIDATE_COLUMNS,
             column_order=[c for c in cands.columns if c not in WHY])
st.table(_reasons(cands), hide_index=True)
st.subheader("Score terms")
st.dataframe(_highlight(widgets.readable(diff.terms_diff(a, b))), hide_index=True)
st.subheader("Facts")
st.dataframe(_highlight(widgets.readable(diff.facts_diff(a, b))), hide_index=True)
