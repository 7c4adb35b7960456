"""The Decisions table's "time (UTC)" column: UTC whatever the machine's zone, with the date.

Before, on a machine in New York, the store read its times in New York time and the column
(headed UTC) showed them as they came, 4 or 5 hours off; it showed ``HH:mm:ss`` alone, so rows
of two days could not be told apart. The browser test (test_decisions_width_browser) checks that
the wider column still fits 1280 px; the grid draws on a canvas, so the format is read here from
what the page gives it.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.reader import DB_ENV
from ingest import DuckDBTraceStore
from tests.app.ui.pages import open_app_page
from tests.factories import make_trace
from tests.ingest.duckdb.test_store_utc import new_york  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches", "new_york")


def test_the_time_column_is_utc_and_dated_on_a_new_york_machine(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    times = [now - timedelta(minutes=i + 1) for i in range(3)]
    path = tmp_path / "traces.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records([make_trace(f"req-{i}", ts=t) for i, t in enumerate(times)])
    finally:
        store.close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROUTELENS_CONFIG", raising=False)
    at = open_app_page("views/decisions.py", monkeypatch, {DB_ENV: str(path)})
    table = at.dataframe[0]
    shown = table.value["ts"]
    assert str(shown.dt.tz) == "UTC", shown.dt.tz
    assert [t.to_pydatetime() for t in shown] == times
    column = json.loads(table.proto.columns)["ts"]
    assert column["label"] == "time (UTC)" and column["type_config"]["timezone"] == "UTC"
    tokens = set(re.findall(r"[A-Za-z]+", column["type_config"]["format"]))
    assert {"MM", "DD", "HH", "mm", "ss"} <= tokens, column  # month and day as well as the time
