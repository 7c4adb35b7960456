"""Streamlit page scripts, one per page; run by ``st.navigation``, never imported."""
