"""Streamlit-cached access to traces: one store per process, short-lived cached lookups.

Page scripts rerun on every interaction; they read through here so a rerun does not hit the
store again. ``st.cache_data`` keeps only JSON-ready dicts (pickled copies), never live models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import streamlit as st

from app.reader import find_trace, reader_from_env
from schemas.trace import DecisionTrace

if TYPE_CHECKING:
    from ingest import TraceStore

__all__ = ["fetch_trace_json", "get_store", "load_trace"]


@st.cache_resource(show_spinner=False)
def get_store() -> TraceStore:
    """Return the process-wide trace store the environment names (:func:`app.reader.reader_from_env`).

    Raises:
        SinkError: The store cannot be opened (not cached: the next rerun tries again).
    """
    return reader_from_env()


@st.cache_data(ttl=2, show_spinner=False)
def fetch_trace_json(request_id: str) -> dict[str, Any] | None:
    """Fetch one trace as ``model_dump(mode="json")``, or None when unknown; cached for 2 s.

    An id that is no request's but is a W3C trace id finds the decision of that trace
    (:func:`app.reader.find_trace`).

    Raises:
        SinkError: The store is unreachable or answered an invalid trace (errors are not cached).
    """
    trace = find_trace(get_store(), request_id)
    return None if trace is None else trace.model_dump(mode="json")


def load_trace(request_id: str) -> DecisionTrace | None:
    """Return the trace of ``request_id`` through the cache, rebuilt as a model.

    Raises:
        SinkError: The store is unreachable or answered an invalid trace.
    """
    data = fetch_trace_json(request_id)
    return None if data is None else DecisionTrace.model_validate(data)
