"""The Decisions and Experiments pages over a trace file from before columns existed (``app --db``: read-only).

An audit found the Decisions page failing (``Referenced column "shadow" not found``) and the
Experiments page a traceback on such a file. Each file here is written today and then made
older (:func:`tests.ingest.duckdb.test_older_file_store.make_older`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.reader import DB_ENV
from ingest import DuckDBTraceStore
from tests.app.ui import test_experiments_page as experiments_page
from tests.app.ui.pages import assert_clean, open_app_page
from tests.app.ui.test_decisions_page import N, seeded
from tests.ingest.duckdb.test_older_file_store import make_older
from tests.ingest.experiments.experiment_data import experiment

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


def test_the_decisions_page_lists_an_older_files_traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "traces.duckdb"
    store = DuckDBTraceStore(path)
    now = datetime.now(UTC)  # the page's window ends now
    try:
        store.write_records([seeded(i, now) for i in range(N)])
    finally:
        store.close()
    make_older(path)
    monkeypatch.setenv(DB_ENV, str(path))
    monkeypatch.delenv("ROUTELENS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    at = open_app_page("views/decisions.py")
    assert not at.error and not at.warning, [e.value for e in at.error]
    shown = at.dataframe[0].value["request_id"].tolist()
    assert shown and shown == [f"req-{i:03d}" for i in range(N - 1, N - 1 - len(shown), -1)]  # newest first


def test_the_experiments_page_compares_an_older_files_arms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traces, feedback = experiment(150, 150)
    path = tmp_path / "exp.duckdb"
    store = DuckDBTraceStore(path)
    store.write_records([experiments_page._shadowed(t, k) if k % 2 == 0 else t for k, t in enumerate(traces)])
    store.write_records(feedback)
    store.close()
    make_older(path)  # shadow among what it lacks
    at = experiments_page.open_page(monkeypatch, path)
    assert not at.error and not at.warning  # type: ignore[attr-defined]
    assert_clean(at)  # type: ignore[arg-type]
    assert (at.selectbox(key="side_a").value, at.selectbox(key="side_b").value) == ("a", "b")  # type: ignore[attr-defined]
    table = at.dataframe[0].value  # type: ignore[attr-defined]
    assert "cost per request" in list(table["metric"])
    assert any(c.value.startswith("No shadow decision in the 200 newest traces")  # never recorded, not an error
               for c in at.caption)  # type: ignore[attr-defined]
