"""Opening one page of the app in Streamlit's ``AppTest``, as a deep link does."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from streamlit.testing.v1 import AppTest

from app.ui import ENTRYPOINT

__all__ = ["open_app_page"]


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
