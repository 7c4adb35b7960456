"""The "Mark as misroute" form on "Why this model": a case is written once, however often Write is pressed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.app import stub_trace_api as stub
from tests.app.ui.test_trace_explorer_page import run_app

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def test_pressing_write_twice_adds_the_case_once(monkeypatch: pytest.MonkeyPatch, stub_api: stub.StubTraceApi,
                                                 tmp_path: Path) -> None:
    policy = Path(shutil.copy(ROOT / "policies" / "seed000.yaml", tmp_path / "seed000.yaml"))
    monkeypatch.setenv("ROUTELENS_CONFIG", str(ROOT / "routelens.yaml"))
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    at = run_app(monkeypatch, stub_api.url, stub.SAMPLE_REQUEST_ID)
    at.text_input(key="mis_policy_path").set_value(str(policy)).run()
    name = next(t.value for t in at.text_input if t.key.startswith("mis_case_name:"))
    at.button(key="mis_write").click().run()
    assert not at.exception and any(s.value.startswith("Written to") for s in at.success)
    assert policy.read_text(encoding="utf-8").count(name) == 1
    at.button(key="mis_write").click().run()  # pressed again: the page now finds the case in the file
    assert not at.exception
    assert policy.read_text(encoding="utf-8").count(name) == 1
    assert not [b for b in at.button if b.key == "mis_write"]
    assert any("already has a case named" in i.value for i in at.info)
