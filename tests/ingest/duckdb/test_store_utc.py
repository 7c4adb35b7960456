"""Every read of a store file is in UTC, whatever the machine's time zone.

A ``TIMESTAMPTZ`` comes back into Python (and is truncated to a day in SQL) in the DuckDB session's
``TimeZone``, the OS zone unless set. Before, only the writer's own connection was set to UTC, and
reads go through cursors, which did not keep it: under ``TZ=America/New_York`` a trace's ``ts``
came back at ``-04:00``, a day bucket began at New York's midnight, and ``replay --verify`` read
the hour of a profile and the age of a state in New York time. Here the machine's zone is New
York (checked on DuckDB itself), over the writer, a read-only open, and the bulk reader's connect.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from ingest.duckdb.store import OFFLINE, DuckDBTraceStore
from schemas.queries import AggregateQuery, TraceFilter
from tests.factories import make_trace

ZONE = "America/New_York"
# Around the end of New York's summer time (06:00 UTC on 2026-11-01): offsets -04:00, then -05:00.
TIMES = [datetime(2026, 10, 31, 23, 30, tzinfo=UTC), datetime(2026, 11, 1, 3, 30, tzinfo=UTC),
         datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 1, 6, 30, tzinfo=UTC)]
WINDOW = TraceFilter(start=datetime(2026, 10, 30, tzinfo=UTC), end=datetime(2026, 11, 3, tzinfo=UTC))


@pytest.fixture
def new_york() -> Iterator[None]:
    """The process's zone is New York for the test (DuckDB's default session zone with it), then restored."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = ZONE
    time.tzset()
    try:
        con = duckdb.connect()  # a database of its own: the session zone DuckDB picks from the machine
        assert con.execute("SELECT current_setting('TimeZone')").fetchone() == (ZONE,)
        con.close()
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def _utc(value: datetime | None) -> bool:
    return value is not None and value.utcoffset() == timedelta(0)


def assert_reads_in_utc(store: DuckDBTraceStore) -> None:
    with store._cursor() as cur:  # what every read goes through
        assert cur.execute("SELECT current_setting('TimeZone')").fetchone() == ("UTC",)
    page = store.search(WINDOW, limit=10)
    assert sorted(s.ts for s in page.items) == TIMES
    assert all(_utc(s.ts) for s in page.items), [s.ts.isoformat() for s in page.items]
    for i, when in enumerate(TIMES):
        trace = store.get(f"req_utc_{i}")
        assert trace is not None and trace.ts == when and _utc(trace.ts), trace and trace.ts.isoformat()
        assert trace.model_dump_json().count('"ts":"') == 1 and f'"ts":"{when:%Y-%m-%dT%H:%M:%S}Z"' in \
            trace.model_dump_json()  # what the query API serves
        states = [c.state for c in trace.candidates if c.state is not None]
        assert states and all(_utc(s.scraped_at) for s in states)
    days = store.aggregate(AggregateQuery(filter=WINDOW, bucket="1d"))  # a day is a UTC day
    assert {b.start: b.requests for b in days if b.requests} == {
        datetime(2026, 10, 31, tzinfo=UTC): 1, datetime(2026, 11, 1, tzinfo=UTC): 3}
    assert all(_utc(b.start) for b in days)


def test_the_writer_and_a_read_only_open_read_utc_under_another_zone(new_york: None, tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    store = DuckDBTraceStore(path, clock=lambda: TIMES[0])
    try:
        store.write_records([make_trace(f"req_utc_{i}", ts=t) for i, t in enumerate(TIMES)])
        assert_reads_in_utc(store)
    finally:
        store.close()
    store = DuckDBTraceStore(path, read_only=True)  # ``--db``, the app on a copied file
    try:
        assert_reads_in_utc(store)
    finally:
        store.close()
    con = duckdb.connect(str(path), read_only=True, config=dict(OFFLINE))  # the replay's bulk reader
    try:
        cur = con.cursor()
        rows = cur.execute("SELECT ts FROM traces ORDER BY ts").fetchall()
        assert [r[0] for r in rows] == TIMES and all(_utc(r[0]) for r in rows)
        assert cur.execute("SELECT min(date_trunc('day', ts)) FROM traces").fetchone() == (
            datetime(2026, 10, 31, tzinfo=UTC),)
    finally:
        con.close()
