"""Every page the entrypoint registers opens without an exception (Streamlit's AppTest, in process).

The page list is read from the entrypoint's ``st.navigation([...st.Page(...)])`` call itself, so
a page added there is covered here without touching this file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.ui import ENTRYPOINT
from tests.app import stub_trace_api as stub

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def registered_pages(entrypoint: Path) -> list[str]:
    """The script paths (relative to the entrypoint) of every ``st.Page(...)`` in the entrypoint."""
    pages = []
    for node in ast.walk(ast.parse(entrypoint.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Page":
            first = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "page")
            assert isinstance(first, ast.Constant) and isinstance(first.value, str), ast.unparse(node)
            pages.append(first.value)
    return pages


PAGES = registered_pages(ENTRYPOINT)


def test_every_view_script_is_registered() -> None:
    views = sorted(str(p.relative_to(ENTRYPOINT.parent)) for p in (ENTRYPOINT.parent / "views").glob("*.py"))
    assert PAGES and sorted(PAGES) == [v for v in views if not v.endswith("__init__.py")]


@pytest.mark.parametrize("request_id", [None, stub.SAMPLE_REQUEST_ID], ids=["blank", "with-request-id"])
@pytest.mark.parametrize("page", PAGES)
def test_page_opens(
    page: str, request_id: str | None, monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi
) -> None:
    monkeypatch.setenv("ROUTELENS_API_URL", stub_api.url)
    at = AppTest.from_file(str(ENTRYPOINT), default_timeout=30)
    if request_id is not None:
        at.query_params["request_id"] = request_id
    at.run()
    assert not at.exception, [e.value for e in at.exception]

    at.switch_page(page).run()

    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
