"""Opening one page of the app in Streamlit's ``AppTest``, as a deep link does."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.ui import ENTRYPOINT

__all__ = ["assert_clean", "open_app_page"]

# What a page must never show an operator: a missing value printed raw, a float that is not a number.
RAW = re.compile(r"\b(None|nan|NaN|null|undefined|<NA>)\b")
TEXT_ELEMENTS = ("title", "subheader", "markdown", "caption", "text", "info", "warning", "success", "error")


def open_app_page(page: str, monkeypatch: pytest.MonkeyPatch | None = None, env: Mapping[str, str] | None = None,
                  **params: str) -> AppTest:
    """Run ``page`` (``views/<name>.py``) with ``env`` set and ``params`` in the URL; fail on an exception.

    The page is switched to before the first run: the landing page is the overview, and a deep
    link opens its own page directly.
    """
    for key, value in (env or {}).items():
        assert monkeypatch is not None, "setting the environment needs monkeypatch"
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ENTRYPOINT), default_timeout=30)
    at.switch_page(page)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def assert_clean(at: AppTest, *, charts_have_data: bool = True, placeholder_tables: tuple[int, ...] = ()) -> None:
    """Fail on an exception, raw ``None``/``nan`` in any text, metric or table cell, or an empty chart.

    Args:
        at: A page that has run.
        charts_have_data: The store has data for every chart drawn (an empty figure is then a bug).
        placeholder_tables: Indexes of tables drawn with a ``placeholder`` for missing cells (their
            missing numbers are shown as the placeholder, not as None).
    """
    assert not at.exception, [e.value for e in at.exception]
    for kind in TEXT_ELEMENTS:
        for element in at.get(kind):
            value = str(getattr(element, "value", ""))
            assert not RAW.search(value), f"{kind}: {value}"
    for metric in at.metric:
        for value in (metric.value, metric.proto.delta, metric.label):
            assert not RAW.search(str(value or "")), f"metric {metric.label}: {value}"
    for i, table in enumerate(at.dataframe):
        frame = table.value
        if i not in placeholder_tables:
            missing = frame.isna() if isinstance(frame, pd.DataFrame) else pd.DataFrame()
            assert not missing.any().any(), f"table {i} has missing cells shown as None:\n{frame}"
        shown = frame.astype(str) if isinstance(frame, pd.DataFrame) else pd.DataFrame()
        assert not shown.apply(lambda c: c.str.fullmatch(RAW.pattern)).any().any(), f"table {i}:\n{frame}"
    if charts_have_data:
        for chart in at.get("plotly_chart"):
            spec = json.loads(chart.proto.spec)
            assert spec.get("data"), f"an empty chart: {spec.get('layout', {}).get('title')}"
