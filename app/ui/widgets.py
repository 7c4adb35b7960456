"""Inputs shared by pages: each keeps its value in the URL, so a link opens the same view."""

from __future__ import annotations

import streamlit as st

__all__ = ["request_id_input"]


def request_id_input(key: str = "request_id") -> str:
    """Show the request id box, synced with the ``?request_id=`` query parameter; return the stripped id.

    The first run takes the id from the URL (a link from ``routelens demo`` or another page);
    after that the box leads and the URL follows it, losing the parameter when the box is emptied.

    Args:
        key: Session-state key of the box, also the name of the query parameter.
    """
    if key not in st.session_state:
        st.session_state[key] = st.query_params.get(key, "")
    value = st.text_input("request_id", key=key, placeholder="e.g. req-7f3a9c").strip()
    if value != st.query_params.get(key, ""):
        if value:
            st.query_params[key] = value
        else:
            del st.query_params[key]
    return value
