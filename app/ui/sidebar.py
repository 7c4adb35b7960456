"""The sidebar every page shares: time window, router version, arm, model, instance; kept in the URL.

A page calls :func:`scope` once at the top and gets a :class:`Scope`: the window's bounds and the
:class:`schemas.queries.TraceFilter` its queries take. Every choice is mirrored into
``st.query_params`` (``?window=1h&model=...``), so a link opens the same view; the URL wins on the
first run of a session, the widgets after that. Choices a page does not use are still kept, so
moving between pages keeps the scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import streamlit as st

from app.ui.timeseries import bucket_for
from schemas.queries import TraceFilter

__all__ = ["WINDOWS", "Scope", "scope", "sync_param"]

WINDOWS: dict[str, timedelta] = {
    "15m": timedelta(minutes=15), "1h": timedelta(hours=1), "6h": timedelta(hours=6),
    "24h": timedelta(hours=24), "7d": timedelta(days=7),
}
FIELDS = ("router_version", "experiment_arm", "model", "instance")
LABELS = {"router_version": "router version", "experiment_arm": "arm", "model": "model", "instance": "instance"}


@dataclass(frozen=True)
class Scope:
    """What the sidebar chose: the window and the filters (None: any)."""

    window: str
    start: datetime
    end: datetime
    router_version: str | None = None
    experiment_arm: str | None = None
    model: str | None = None
    instance: str | None = None

    @property
    def bucket(self) -> str:
        """A bucket giving a readable number of points over the window (:func:`app.ui.timeseries.bucket_for`)."""
        return bucket_for(self.end - self.start)

    def trace_filter(self, **extra: object) -> TraceFilter:
        """The store filter of this scope (``extra`` adds rule, fallback, outcome, ...)."""
        return TraceFilter.model_validate({
            "start": self.start, "end": self.end, "router_version": self.router_version,
            "experiment_arm": self.experiment_arm, "model": self.model, "instance": self.instance, **extra,
        })


def sync_param(key: str, value: str | None) -> None:
    """Mirror one choice into the URL (dropped when empty)."""
    if value:
        if st.query_params.get(key) != value:
            st.query_params[key] = value
    elif key in st.query_params:
        del st.query_params[key]


def scope(now: datetime | None = None, default_window: str = "1h") -> Scope:
    """Draw the shared sidebar and return its scope (``now``: the window's end, injected in tests)."""
    end = now or datetime.now(UTC)
    with st.sidebar:
        st.markdown("**Scope**")
        given = st.query_params.get("window", default_window)
        window = st.selectbox("time window", list(WINDOWS), index=list(WINDOWS).index(given)
                              if given in WINDOWS else list(WINDOWS).index(default_window), key="sb_window")
        sync_param("window", window if window != default_window else None)
        chosen: dict[str, str | None] = {}
        for field in FIELDS:
            key = f"sb_{field}"
            if key not in st.session_state:
                st.session_state[key] = st.query_params.get(field, "")
            text = st.text_input(LABELS[field], key=key, placeholder="any").strip()
            chosen[field] = text or None
            sync_param(field, chosen[field])
    return Scope(window=window, start=end - WINDOWS[window], end=end, **chosen)
