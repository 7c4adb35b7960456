"""Inputs and small renderers shared by pages: each input keeps its value in the URL, so a link opens the same view."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from app.units import DASH

__all__ = ["columns_input", "plain", "readable", "request_id_input", "table"]

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
    _to_url(key, value)
    return value


def _to_url(param: str, value: str) -> None:
    """Keep ``?<param>=`` in step with a widget's value (absent when empty)."""
    if value != st.query_params.get(param, ""):
        if value:
            st.query_params[param] = value
        else:
            del st.query_params[param]


def columns_input(label: str, more: Mapping[str, str], key: str, param: str = "columns") -> list[str]:
    """Show a picker of a table's optional columns, synced with ``?<param>=a,b``; return the names picked.

    A table shows the columns an operator reads first and offers the rest here, so that it fits the
    window instead of scrolling sideways. The first run takes the choice from the URL (a name not
    offered is dropped, with a warning); after that the picker leads and the URL follows it.

    Args:
        label: The picker's label.
        more: The optional columns, name -> label, in the table's order.
        key: Session-state key of the picker.
        param: Name of the query parameter.

    Returns:
        The names picked, in the order of ``more``.
    """
    if key not in st.session_state:
        given = [n.strip() for n in st.query_params.get(param, "").split(",") if n.strip()]
        if unknown := [n for n in given if n not in more]:
            shown = plain(f"{param}={','.join(unknown)[:40]!r}")
            st.warning(f"Ignored {shown} from the link: choose among the offered columns.")
        st.session_state[key] = [n for n in more if n in given]
    picked = st.multiselect(label, list(more), key=key, format_func=lambda n: more[n], placeholder="none")
    chosen = [n for n in more if n in picked]
    _to_url(param, ",".join(chosen))
    return chosen


def readable(frame: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """``frame`` as an operator reads it: floats rounded to ``digits``, a missing value ``—`` (never None or nan).

    Booleans and integers are kept (a Styler can still test them) unless a value is missing; only display changes.
    """
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if pd.api.types.is_integer_dtype(column) and column.isna().any():  # nullable Int64: <NA> shown as None
            out[name] = [DASH if pd.isna(v) else str(v) for v in column]
            continue
        if pd.api.types.is_bool_dtype(column) or pd.api.types.is_integer_dtype(column):
            continue
        if pd.api.types.is_float_dtype(column):
            out[name] = [DASH if pd.isna(v) else f"{v:.{digits}f}" for v in column]
        else:
            out[name] = [DASH if v is None or (isinstance(v, float) and pd.isna(v)) else v for v in column]
    return out


def table(rows: pd.DataFrame | list[dict[str, Any]]) -> None:
    """A table as an operator reads it (:func:`readable`), without the index."""
    st.dataframe(readable(rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)), hide_index=True)
