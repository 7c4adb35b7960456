"""The Experiments page checks the split against the arms' shares of the running configuration, or says it cannot.

An audit ran a 70/30 experiment: the page asked the store for a comparison without the shares and
said "Sample ratio mismatch … distrust the deltas" (the store assumed 50/50), while the CLI on the
same window said "designed 0.7/0.3; p = 0.958".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.reader import DB_ENV
from app.ui.limits import CONFIG_ENV
from ingest import DuckDBTraceStore
from tests.app.ui.pages import assert_clean, open_app_page
from tests.ingest.experiments.experiment_data import END, experiment

PAGE = "views/experiments.py"
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")
FLEET = """
fleet:
  instances:
    - {id: i1, model: m, url: "http://127.0.0.1:1"}
"""
ARMS = """
experiments:
  key: session
  arms:
    - {name: a, router_version: v2.3, share: 0.7}
    - {name: b, router_version: v2.4, share: 0.3}
"""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    traces, feedback = experiment(700, 300)  # arm a (v2.3) 70%, arm b (v2.4) 30%
    path = tmp_path / "seventy-thirty.duckdb"
    store = DuckDBTraceStore(path)
    store.write_records(traces)
    store.write_records(feedback)
    store.close()
    return path


def _open(monkeypatch: pytest.MonkeyPatch, db: Path, config: Path, **params: str) -> AppTest:
    at = open_app_page(PAGE, monkeypatch, {DB_ENV: str(db), CONFIG_ENV: str(config)},
                       **{"end": END.isoformat(), **params})
    assert_clean(at)
    return at


def _texts(at: AppTest, kind: str) -> list[str]:
    return [str(e.value) for e in at.get(kind)]


@pytest.mark.parametrize("by", ["arm", "version"])
def test_the_arms_shares_of_the_config_are_the_design(monkeypatch: pytest.MonkeyPatch, db: Path, tmp_path: Path,
                                                      by: str) -> None:
    config = tmp_path / "routelens.yaml"
    config.write_text(FLEET + ARMS, encoding="utf-8")
    at = _open(monkeypatch, db, config, by=by)
    assert not _texts(at, "error"), _texts(at, "error")
    (split,) = [s for s in _texts(at, "success") if "Split as designed" in s]
    assert "700 / 300 requests against a designed 0.7 / 0.3" in split
    assert not any("SAMPLE RATIO MISMATCH" in m for m in _texts(at, "markdown"))


def test_without_a_design_the_split_is_assumed_and_said(monkeypatch: pytest.MonkeyPatch, db: Path,
                                                        tmp_path: Path) -> None:
    config = tmp_path / "routelens.yaml"
    config.write_text(FLEET, encoding="utf-8")  # no experiments section: the shares are nobody's
    at = _open(monkeypatch, db, config)
    assert not _texts(at, "error") and not any("Split" in s for s in _texts(at, "success"))
    (said,) = [i for i in _texts(at, "info") if "Designed shares unknown" in i]
    assert said.startswith("Designed shares unknown, assumed 50/50: 700 / 300 requests")
    assert any(m.startswith("**designed shares unknown, assumed 50/50") for m in _texts(at, "markdown"))
