"""The Experiments page's series leave out the requests forced onto an arm by header, as its table does.

AppTest over a DuckDB file holding an experiment and requests forced onto each arm (errors at ten
times the price, a second's latency): read from the file, and through the store's HTTP API
(``GET /v1/analytics/experiment-series``, which ``routelens app`` reads by default), each side's
series sum to its unforced requests. Each arm's ``aggregate`` counts the forced ones.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.reader import API_ENV, DB_ENV
from ingest import DuckDBTraceStore
from schemas.queries import AggregateQuery, TraceFilter
from tests.app.ui.pages import assert_clean, open_app_page
from tests.ingest.experiments.experiment_data import END, T0, experiment, forced
from tests.ingest.test_trace_store import served

PAGE = "views/experiments.py"
N = 150
FORCED = {"a": 7, "b": 12}
pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    traces, feedback = experiment(N, N)
    forced_traces, forced_feedback = forced(FORCED)
    path = tmp_path / "exp.duckdb"
    store = DuckDBTraceStore(path)
    store.write_records([*traces, *forced_traces])
    store.write_records([*feedback, *forced_feedback])
    store.close()
    return path


def _values(y: Any) -> list[float]:
    """A trace's y as plotly sends it: a list, or ``{"dtype", "bdata"}`` (base64 of a NumPy array); gaps dropped."""
    if isinstance(y, dict):
        y = np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]).tolist()
    return [v for v in y if v is not None and not math.isnan(v)]


def _series(at: Any) -> dict[str, list[float]]:
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    return {t["name"]: _values(t["y"]) for t in chart["data"]}


def test_the_series_count_what_the_table_counts(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    at = open_app_page(PAGE, monkeypatch, {DB_ENV: str(db)}, end=END.isoformat(), a="a", b="b")
    assert_clean(at)
    assert any("left out: 7 / 12" in m.value for m in [*at.info, *at.success, *at.warning])
    lines = _series(at)
    assert sum(lines["a · requests"]) == N and sum(lines["b · requests"]) == N  # not N + 7, N + 12
    assert max(lines["a · latency p95 (ms)"]) < 1000  # a forced request's second is in no bucket
    assert not any("forced onto an arm" in c.value for c in at.caption)


def test_through_the_http_api_the_series_count_what_the_table_counts(monkeypatch: pytest.MonkeyPatch,
                                                                      db: Path, tmp_path: Path) -> None:
    store = DuckDBTraceStore(db)
    try:
        with served(store, tmp_path / "spool") as url:
            at = open_app_page(PAGE, monkeypatch, {API_ENV: url}, end=END.isoformat(), a="a", b="b")
        rolled = store.aggregate(AggregateQuery(filter=TraceFilter(start=T0, end=END, experiment_arm="a")))
    finally:
        store.close()
    assert_clean(at)
    assert any("left out: 7 / 12" in m.value for m in [*at.info, *at.success, *at.warning])
    lines = _series(at)
    assert (sum(lines["a · requests"]), sum(lines["b · requests"])) == (N, N)
    assert sum(b.requests for b in rolled) == N + FORCED["a"]  # what each arm's buckets would have drawn
    assert max(lines["a · latency p95 (ms)"]) < 1000
    assert not any("forced onto an arm" in c.value for c in at.caption)
