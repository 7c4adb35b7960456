"""RouteLens Streamlit entry point: page config and navigation, nothing more (STYLE 6.2)."""

import streamlit as st

st.set_page_config(page_title="RouteLens", layout="wide")
st.navigation(
    [
        # The default page is served at "/" whatever its url_path, so it is a one-line page that opens the
        # overview: every page, the overview included, then has its own address (/trace?request_id=...).
        st.Page("views/home.py", title="Home", url_path="home", default=True),
        st.Page("views/overview.py", title="Overview", url_path="overview"),
        st.Page("views/fleet.py", title="Fleet health", url_path="fleet"),
        st.Page("views/topology.py", title="Traffic topology", url_path="topology"),
        st.Page("views/constraints.py", title="Constraints", url_path="constraints"),
        st.Page("views/decisions.py", title="Decisions", url_path="decisions"),
        st.Page("views/trace_explorer.py", title="Why this model", url_path="trace"),
        st.Page("views/diff.py", title="Decision diff", url_path="diff"),
        st.Page("views/experiments.py", title="Experiments", url_path="experiments"),
        st.Page("views/probes.py", title="Probes & alerts", url_path="probes"),
    ]
).run()
