"""The Fleet page's time slider against the moments it stands for (audit of a real run).

Over the 15-minute window the slider's stops are 30 s apart, and half of them read like their
neighbour ("−14m" for 14 min 30 s and for 14 min): an operator could not tell which moment a link's
``?at=`` or the slider showed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.reader import DB_ENV
from app.ui.data import fleet as data
from app.ui.sidebar import WINDOWS
from ingest.duckdb.store import DuckDBTraceStore
from tests.app.ui.pages import open_app_page

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


@pytest.mark.parametrize("window", list(WINDOWS))
def test_every_stop_of_every_window_reads_apart(window: str) -> None:
    stops = data.offsets(WINDOWS[window])
    labels = [data.offset_label(s) for s in stops]
    assert len(set(labels)) == len(stops), labels


def test_a_stop_reads_its_seconds() -> None:
    assert [data.offset_label(s) for s in (870, 840, 90, 5 * 3600 + 1800)] == ["−14m 30s", "−14m", "−90s", "−5h 30m"]


def test_the_page_slider_of_the_15_minute_window(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    DuckDBTraceStore(tmp_path / "t.duckdb").close()
    at = open_app_page("views/fleet.py", monkeypatch, {DB_ENV: str(tmp_path / "t.duckdb")}, window="15m", at="870")

    slider = at.select_slider(key="fleet_at")
    assert slider.value == 870 and len(set(slider.options)) == len(slider.options) == 31
    assert slider.options[:3] == ["−15m", "−14m 30s", "−14m"]
