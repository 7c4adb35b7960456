"""The sidebar every page shares: time window, router version, arm, model, instance; kept in the URL.

A page calls :func:`scope` once at the top and gets a :class:`Scope`: the window's bounds and the
:class:`schemas.queries.TraceFilter` its queries take. Every choice is mirrored into
``st.query_params`` (``?window=1h&model=...``), so a link opens the same view; the URL wins on the
first run of a page, the widgets after that. Choices a page does not use are still kept, so
moving between pages keeps the scope: Streamlit drops a widget's state when the page changes (and
the browser drops the URL's parameters), so the choices are also kept under :data:`KEPT`, a session
key no widget owns, and a page's widgets start from the URL, else from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import streamlit as st

from app.ui.timeseries import bucket_for
from schemas.queries import TraceFilter

__all__ = ["KEPT", "WINDOWS", "Scope", "keep", "kept", "scope", "sync_param"]

WINDOWS: dict[str, timedelta] = {
    "15m": timedelta(minutes=15), "1h": timedelta(hours=1), "6h": timedelta(hours=6),
    "24h": timedelta(hours=24), "7d": timedelta(days=7),
}
FIELDS = ("router_version", "experiment_arm", "model", "instance")
LABELS = {"router_version": "router version", "experiment_arm": "arm", "model": "model", "instance": "instance"}
KEPT = "sidebar_kept"  # {url param: value} of the scope, across pages (not a widget key: those are dropped)


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


def kept(key: str) -> str | None:
    """The scope's ``key`` (``window``, ``instance``, ...) as the URL has it, else as the last page kept it."""
    saved: dict[str, str] = st.session_state.get(KEPT, {})
    return st.query_params.get(key) or saved.get(key)


def keep(key: str, value: str | None) -> None:
    """Mirror one scope choice into the URL and keep it for the next page (dropped when empty)."""
    sync_param(key, value)
    saved: dict[str, str] = st.session_state.setdefault(KEPT, {})
    if value:
        saved[key] = value
    else:
        saved.pop(key, None)


def _chose_window(default_window: str) -> None:
    window = st.session_state["sb_window"]
    keep("window", window if window != default_window else None)


def _chose(field: str) -> None:
    keep(field, str(st.session_state[f"sb_{field}"]).strip() or None)


def scope(now: datetime | None = None, default_window: str = "1h") -> Scope:
    """Draw the shared sidebar and return its scope (``now``: the window's end, injected in tests).

    Each widget is seeded on every run from the URL, else the kept scope; a change is kept by its
    callback, before the run. A stale value of the previous page's widget (same key, another
    page) is never read, so entering a page cannot reset the scope.
    """
    end = now or datetime.now(UTC)
    with st.sidebar:
        st.markdown("**Scope**")
        given = kept("window")
        st.session_state["sb_window"] = given if given in WINDOWS else default_window
        window = str(st.selectbox("time window", list(WINDOWS), key="sb_window", on_change=_chose_window,
                                  args=(default_window,)))
        keep("window", window if window != default_window else None)
        chosen: dict[str, str | None] = {}
        for field in FIELDS:
            key = f"sb_{field}"
            st.session_state[key] = kept(field) or ""
            text = st.text_input(LABELS[field], key=key, placeholder="any", on_change=_chose, args=(field,)).strip()
            chosen[field] = text or None
            keep(field, chosen[field])
    return Scope(window=window, start=end - WINDOWS[window], end=end, **chosen)
