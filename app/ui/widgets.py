"""Inputs and small renderers shared by pages: each input keeps its value in the URL, so a link opens the same view."""

from __future__ import annotations

import re

import streamlit as st

__all__ = ["plain", "request_id_input"]

_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>#|~$])")


def plain(text: str) -> str:
    """Escape Markdown in ``text`` so ids and reasons read literally inside ``st.warning``/``st.caption``."""
    return _MARKDOWN.sub(r"\\\1", text)


def request_id_input(key: str = "request_id", label: str = "request_id") -> str:
    """Show the request id box, synced with the ``?<key>=`` query parameter; return the stripped id.

    The first run takes the id from the URL (a link from ``routelens demo`` or another page);
    after that the box leads and the URL follows it, losing the parameter when the box is emptied.

    Args:
        key: Session-state key of the box, also the name of the query parameter.
        label: The box's label.
    """
    if key not in st.session_state:
        st.session_state[key] = st.query_params.get(key, "")
    value = st.text_input(label, key=key, placeholder="e.g. req-7f3a9c").strip()
    if value != st.query_params.get(key, ""):
        if value:
            st.query_params[key] = value
        else:
            del st.query_params[key]
    return value
