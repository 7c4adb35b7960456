"""RouteLens Streamlit entry point: page config and navigation, nothing more (STYLE 6.2)."""

import streamlit as st

st.set_page_config(page_title="RouteLens", layout="wide")
st.navigation(
    [
        st.Page("views/trace_explorer.py", title="Why this model", url_path="trace", default=True),
        st.Page("views/probes.py", title="Probes & alerts", url_path="probes"),
        st.Page("views/decisions.py", title="Decisions", url_path="decisions"),
        st.Page("views/diff.py", title="Decision diff", url_path="diff"),
        st.Page("views/overview.py", title="Overview", url_path="overview"),
        st.Page("views/fleet.py", title="Fleet health", url_path="fleet"),
        st.Page("views/topology.py", title="Traffic topology", url_path="topology"),
        st.Page("views/constraints.py", title="Constraints", url_path="constraints"),
    ]
).run()
