"""Misroutes on DuckDB: pages of feedback matched by index, and the join when they do not fill the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

import ingest.duckdb.analytics as analytics
from ingest.duckdb.store import DuckDBTraceStore
from schemas.queries import TraceFilter
from tests.ingest.test_trace_store import DATA, expected_misroutes

FILTERS = [TraceFilter(), TraceFilter(rule="legal"), TraceFilter(max_latency_ms=300.0),
           TraceFilter(rule="no-such-rule"), TraceFilter(start=DATA.traces[40].ts)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DuckDBTraceStore:
    s = DuckDBTraceStore(Path(tmp_path_factory.mktemp("db")) / "t.duckdb")
    s.write_records(DATA.traces)
    s.write_records(DATA.feedback)
    return s


@pytest.mark.parametrize("pages", [1, 2, 4])
@pytest.mark.parametrize("limit", [1, 2, 3, 100])
def test_every_path_gives_the_newest_matching_misroutes(store: DuckDBTraceStore, monkeypatch: pytest.MonkeyPatch,
                                                         pages: int, limit: int) -> None:
    monkeypatch.setattr(analytics, "_PAGES", pages)  # 1: the join answers whenever a page does not fill the limit
    for flt in FILTERS:
        assert store.misroutes(flt, limit) == expected_misroutes(flt)[:limit], flt
