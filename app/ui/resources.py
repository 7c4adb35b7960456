"""Streamlit-cached access to traces: one source per process, short-lived cached lookups.

Page scripts rerun on every interaction; they read through here so a rerun does not hit the
API again. ``st.cache_data`` keeps only JSON-ready dicts (pickled copies), never live models.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.trace_source import TraceSource, source_from_env
from schemas.trace import DecisionTrace

__all__ = ["fetch_trace_json", "get_source", "load_trace"]


@st.cache_resource(show_spinner=False)
def get_source() -> TraceSource:
    """Return the process-wide trace source chosen by :func:`app.trace_source.source_from_env`."""
    return source_from_env()


@st.cache_data(ttl=2, show_spinner=False)
def fetch_trace_json(request_id: str) -> dict[str, Any] | None:
    """Fetch one trace as ``model_dump(mode="json")``, or None when unknown; cached for 2 s.

    Raises:
        TraceSourceError: The source is unreachable (errors are not cached).
    """
    trace = get_source().get(request_id)
    return None if trace is None else trace.model_dump(mode="json")


def load_trace(request_id: str) -> DecisionTrace | None:
    """Return the trace of ``request_id`` through the cache, rebuilt as a model.

    Raises:
        TraceSourceError: The source is unreachable.
    """
    data = fetch_trace_json(request_id)
    return None if data is None else DecisionTrace.model_validate(data)
