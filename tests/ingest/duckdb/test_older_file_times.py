"""A trace file holding a ``ts`` outside 1970 .. 9999 in UTC, stored before the contract bounded it.

Before ``schemas.common.UtcTime`` (2026-12-06) the intake took any aware datetime: a trace at
``0001-01-01T00:00:00+14:00`` (year 0 in UTC) or ``9999-12-31T23:30:00-01:00`` (year 10000) was
stored. The file here is written today and such times are then set through DuckDB itself
(bypassing the intake). Every read must list and open each such trace (its ts the nearest instant
the contract holds) and leave counts and windows of the other traces as they are. Over each
store, read-only (``--db``) and read-write (migrated, rolled up).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import duckdb
import pytest

from bench.synthetic import T0, TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.pipeline.emitter import TraceEmitter
from ingest.trace_store import BadCursor, encode_cursor
from schemas.common import EARLIEST_TIME, LATEST_TIME
from schemas.feedback import Feedback
from schemas.queries import AggregateQuery, TraceFilter
from schemas.trace import DecisionTrace
from tests.ingest.http_api.test_routes import Call, serve

# How a time before the range reads, and one after it: the nearest instants the contract holds.
SHOWN_EARLIEST, SHOWN_LATEST = EARLIEST_TIME, LATEST_TIME - timedelta(microseconds=1)
# As the older intake let them through (UTC), and beyond: DuckDB's own infinities.
STORED = {
    "0000-12-31 10:00:00+00": SHOWN_EARLIEST,  # 0001-01-01T00:00:00+14:00: Python holds no year 0
    "10000-01-01 00:30:00+00": SHOWN_LATEST,  # 9999-12-31T23:30:00-01:00
    "1900-01-01 00:00:00+00": SHOWN_EARLIEST,  # Python holds it, the contract does not
    "9999-12-31 12:00:00+00": SHOWN_LATEST,  # the contract's excluded last day
    "60000-06-01 00:00:00+00": SHOWN_LATEST,
    "infinity": SHOWN_LATEST,
    "-infinity": SHOWN_EARLIEST,
}
N = 12
WINDOW = TraceFilter(start=T0 - timedelta(days=1), end=T0 + timedelta(days=1))


@dataclass(frozen=True)
class OldFile:
    path: Path
    traces: list[DecisionTrace]  # as each reads back: ts outside the range at the nearest bound
    order: list[str]  # request ids by stored ts, newest first (the search's order)
    outside: set[str]


def make_file(path: Path) -> OldFile:
    """Write ``N`` traces and feedback on two (one outside), then set ``STORED`` times on the first ones."""
    traces = list(TraceFactory(seed=41, n_candidates=3).traces(N))
    store = DuckDBTraceStore(path, clock=lambda: T0)  # nothing sealed yet
    try:
        store.write_records(traces)
        store.write_records([Feedback(request_id=t.request_id, ts=T0 + timedelta(hours=1), correct=False,
                                      expected_model="qwen-72b") for t in (traces[0], traces[-1])])
    finally:
        store.close()
    con = duckdb.connect(str(path))
    try:
        for t, stored in zip(traces, STORED, strict=False):
            con.execute("UPDATE traces SET ts = ?::TIMESTAMPTZ WHERE request_id = ?", [stored, t.request_id])
        newest_first = "SELECT request_id FROM traces ORDER BY ts DESC, request_id DESC"
        order = [r[0] for r in con.execute(newest_first).fetchall()]
    finally:
        con.close()
    shown = [t.model_copy(update={"ts": at}) for t, at in zip(traces, STORED.values(), strict=False)]
    return OldFile(path, shown + traces[len(STORED):], order, {t.request_id for t in shown})


@pytest.fixture(scope="module")
def old_file(tmp_path_factory: pytest.TempPathFactory) -> OldFile:
    return make_file(tmp_path_factory.mktemp("times") / "old.duckdb")


@pytest.fixture(params=["read-only", "read-write"])
def store(request: pytest.FixtureRequest, old_file: OldFile, tmp_path: Path) -> Iterator[DuckDBTraceStore]:
    path = tmp_path / "copy.duckdb"
    path.write_bytes(old_file.path.read_bytes())
    if request.param == "read-only":
        opened = DuckDBTraceStore(path, read_only=True)
    else:  # rolls up the closed minutes at open: the aggregates read the rollup
        opened = DuckDBTraceStore(path, clock=lambda: T0 + timedelta(hours=2))
    yield opened
    opened.close()


def test_each_trace_is_listed_and_opened_outside_times_at_the_nearest_bound(store: DuckDBTraceStore,
                                                                             old_file: OldFile) -> None:
    """Before, one such trace failed the whole list (TraceSummary) and its own lookup (DecisionTrace)."""
    page = store.search(TraceFilter(), limit=100)
    assert [s.request_id for s in page.items] == old_file.order and page.next_cursor is None
    by_id = {t.request_id: t for t in old_file.traces}
    assert all(s.ts == by_id[s.request_id].ts for s in page.items)
    for trace in old_file.traces:
        assert store.get(trace.request_id) == trace
    assert store.count() == N


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_pages_list_each_trace_once_in_stored_order(store: DuckDBTraceStore, old_file: OldFile, limit: int) -> None:
    """The cursor carries the stored ts: a page ending on a trace outside the range does not skip the next."""
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(N + 1):
        page = store.search(TraceFilter(), limit=limit, cursor=cursor)
        seen += [s.request_id for s in page.items]
        if (cursor := page.next_cursor) is None:
            break
    assert seen == old_file.order


def test_windows_and_counts_of_the_other_traces_are_unchanged(store: DuckDBTraceStore, old_file: OldFile) -> None:
    inside = [t for t in old_file.traces if t.request_id not in old_file.outside]
    found = store.search(WINDOW, limit=100).items
    assert [s.request_id for s in found] == [r for r in old_file.order if r not in old_file.outside]
    assert sum(b.requests for b in store.aggregate(AggregateQuery(filter=WINDOW, bucket="1m"))) == len(inside)
    assert sum(e.requests for e in store.traffic(WINDOW)) == len(inside)


def test_a_misroute_on_a_trace_outside_the_range_is_listed(store: DuckDBTraceStore, old_file: OldFile) -> None:
    got = {m.request_id: m.trace_ts for m in store.misroutes(TraceFilter())}
    first, last = old_file.traces[0], old_file.traces[-1]
    assert got == {first.request_id: SHOWN_EARLIEST, last.request_id: last.ts}


@pytest.mark.parametrize("ts", ["2026-13-45 00:00:00+00", "noon", "0000-12-31 (BC) 10:00:00+00; DROP TABLE x"])
def test_a_cursor_holding_no_instant_is_refused(store: DuckDBTraceStore, ts: str) -> None:
    with pytest.raises(BadCursor):
        store.search(TraceFilter(), cursor=encode_cursor([ts, "req_x"]))


def test_the_store_api_lists_and_opens_them(tmp_path: Path, old_file: OldFile) -> None:
    (tmp_path / "t.duckdb").write_bytes(old_file.path.read_bytes())

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        seen: list[str] = []
        path = "/v1/traces?limit=4"
        for _ in range(N):
            status, page = await call("GET", path)
            assert status == 200, page
            seen += [i["request_id"] for i in page["items"]]
            if not page["next_cursor"]:
                break
            path = f"/v1/traces?limit=4&cursor={page['next_cursor']}"
        assert seen == old_file.order
        for trace in old_file.traces[:len(STORED)]:
            status, body = await call("GET", "/v1/traces/" + quote(trace.request_id, safe=""))
            assert status == 200 and DecisionTrace.model_validate(body) == trace

    serve(tmp_path, check)


def test_the_bounds_are_the_contracts_first_and_last_instants() -> None:
    trace = next(TraceFactory(seed=42, n_candidates=1).traces(1))
    for at in (SHOWN_EARLIEST, SHOWN_LATEST):  # the models take both
        assert DecisionTrace.model_validate(trace.model_dump() | {"ts": at}).ts == at
    for beyond in (SHOWN_EARLIEST - timedelta(microseconds=1), SHOWN_LATEST + timedelta(microseconds=1)):
        with pytest.raises(ValueError):
            DecisionTrace.model_validate(trace.model_dump() | {"ts": beyond})
