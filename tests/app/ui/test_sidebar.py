"""The shared sidebar keeps its scope across pages, as the docs promise (AppTest, the app's own navigation)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.app import stub_trace_api as stub
from tests.app.ui.pages import open_app_page

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def navigate(at: AppTest, page: str) -> AppTest:
    """Click ``page`` in the sidebar: the browser drops the URL's parameters, then the page runs."""
    for key in list(at.query_params):
        del at.query_params[key]
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown(at: AppTest) -> tuple[str, str]:
    return str(at.selectbox(key="sb_window").value), str(at.text_input(key="sb_instance").value)


def test_moving_between_pages_keeps_the_scope(monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi) -> None:
    at = open_app_page("views/overview.py", monkeypatch, {"ROUTELENS_API_URL": stub_api.url},
                       window="15m", instance="coder-6b-a")
    assert shown(at) == ("15m", "coder-6b-a")

    navigate(at, "views/decisions.py")
    assert shown(at) == ("15m", "coder-6b-a")
    assert at.query_params["window"] == "15m" and at.query_params["instance"] == "coder-6b-a"

    at.selectbox(key="sb_window").set_value("6h").run()
    at.text_input(key="sb_instance").set_value("").run()
    navigate(at, "views/overview.py")
    assert shown(at) == ("6h", "")
    assert at.query_params["window"] == "6h" and "instance" not in at.query_params


def test_a_link_with_its_own_scope_wins_over_the_kept_one(monkeypatch: pytest.MonkeyPatch,
                                                          stub_api: stub.StubTraceApi) -> None:
    at = open_app_page("views/overview.py", monkeypatch, {"ROUTELENS_API_URL": stub_api.url},
                       window="15m", instance="coder-6b-a")
    for key in list(at.query_params):
        del at.query_params[key]
    at.query_params["instance"] = "coder-6b-b"
    at.switch_page("views/decisions.py").run()
    assert shown(at) == ("15m", "coder-6b-b")


def test_a_page_default_window_is_not_kept_as_a_choice(monkeypatch: pytest.MonkeyPatch,
                                                       stub_api: stub.StubTraceApi) -> None:
    """Left at a page's default, the window is no choice: the next page opens at its own default."""
    at = open_app_page("views/overview.py", monkeypatch, {"ROUTELENS_API_URL": stub_api.url})
    assert shown(at) == ("1h", "")
    navigate(at, "views/experiments.py")
    assert shown(at)[0] == "24h" and "window" not in at.query_params


def test_the_probes_page_opens_in_the_scope_it_was_entered_with(monkeypatch: pytest.MonkeyPatch,
                                                                stub_api: stub.StubTraceApi) -> None:
    at = open_app_page("views/overview.py", monkeypatch, {"ROUTELENS_API_URL": stub_api.url}, window="15m")
    navigate(at, "views/probes.py")
    assert at.radio(key="window").value == "15m" and at.query_params["window"] == "15m"

    at.radio(key="window").set_value("6h").run()
    navigate(at, "views/decisions.py")
    assert shown(at) == ("6h", "")
