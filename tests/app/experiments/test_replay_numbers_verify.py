"""``replay --verify``'s figures over a gateway's traces: the file read in bulk and the query API trace by trace agree.

A trace file is now read in bulk (:mod:`app.experiments.stored_traces`: one scan, each stored state
validated once and shared; about 5 times the traces a second at 200 candidates); every trace it
assembles must be the one the store's ``get`` reads. The report must not depend on the path: the
same counts, and the same mismatches listed, the oldest first (the query API pages newest first,
and listed the newest, the first mismatch last). A stored record that does not load is counted
with its reason, not a traceback.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from app.cli import main
from app.experiments import bulk
from app.experiments.rows import SAMPLED_OUT, UNREADABLE
from app.experiments.stored_traces import _States, read_traces
from app.experiments.verify import verify_file, verify_range
from ingest import DuckDBTraceStore
from ingest.codec.encoder import Encoder
from ingest.record_sink import batch_of
from schemas.queries import TraceFilter
from schemas.trace import DecisionTrace
from tests.app.experiments.test_replay_gateway import traffic
from tests.ingest.test_trace_store import served

TAMPERED = (7, 19, 33, 41, 58)  # positions in time order whose stored totals are not what was decided


def _tampered(trace: DecisionTrace) -> DecisionTrace:
    cands = list(trace.candidates)
    at = next(i for i, c in enumerate(cands) if c.total is not None)
    cands[at] = cands[at].model_copy(update={"total": (cands[at].total or 0.0) + 0.25})
    return trace.model_copy(update={"candidates": cands})


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[DecisionTrace], datetime, datetime]:
    """A gateway's 80 decisions (rules, softmax, sessions) stored with their policy, a fifth without detail."""
    tmp = tmp_path_factory.mktemp("gw")
    hooks, _ = asyncio.run(traffic(tmp, 80))
    traces = sorted(hooks.traces.values(), key=lambda t: (t.ts, t.request_id))
    traces = [_tampered(t) if i in TAMPERED else t for i, t in enumerate(traces)]
    db = tmp / "t.duckdb"
    store = DuckDBTraceStore(db)
    store.write_records(list(hooks.policies.values()))
    enc = Encoder(detail_share=0.8)
    store.write(store.prepare(batch_of([item for t in traces for item in enc.encode(t)])))
    store.close()
    return db, traces, traces[0].ts, traces[-1].ts + timedelta(seconds=1)


def _detail(db: Path) -> dict[str, bool]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT request_id, detail FROM traces").fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("kept", [None, 3], ids=["kept", "cleared-between-batches"])
def test_every_trace_read_in_bulk_is_the_one_get_reads(stored: tuple[Any, ...], kept: int | None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    if kept is not None:
        monkeypatch.setattr(_States, "MAX_KEPT", kept)
    db, traces, since, until = stored
    detail = _detail(db)
    assert 0 < sum(not d for d in detail.values()) < len(traces)  # some stored without their detail
    con = bulk.open_file(db)
    store = DuckDBTraceStore(db, read_only=True)
    try:
        read = [item for batch in read_traces(con, TraceFilter(start=since, end=until), batch_rows=16)
                for item in batch]
        assert sorted(i.request_id for i in read) == sorted(t.request_id for t in traces)
        for item in read:
            if detail[item.request_id]:
                assert item.missing is None and item.trace == store.get(item.request_id), item.request_id
            else:
                assert item.trace is None and item.missing == SAMPLED_OUT
    finally:
        store.close()
        con.close()
    # one object per stored state: traces decided on the same scrape hold the same one
    states = [c.state for i in read if i.trace is not None for c in i.trace.candidates if c.state is not None]
    assert len({id(s) for s in states}) < len(states)


def _same(a: Any, b: Any) -> None:
    assert a.model_dump(exclude={"elapsed_s"}) == b.model_dump(exclude={"elapsed_s"})


def test_the_file_in_bulk_and_the_store_trace_by_trace_give_one_report(stored: tuple[Any, ...]) -> None:
    db, traces, since, until = stored
    detail = _detail(db)
    bad = [traces[i].request_id for i in TAMPERED if detail[traces[i].request_id]]
    assert len(bad) >= 3
    bulk_report = verify_file(db, since, until, max_listed=3)
    store = DuckDBTraceStore(db, read_only=True)
    try:
        paged = verify_range(store, TraceFilter(start=since, end=until), max_listed=3)
    finally:
        store.close()
    _same(bulk_report, paged)
    assert bulk_report.n == len(traces) and bulk_report.mismatched == len(bad)
    assert bulk_report.reproduced == sum(detail.values()) - len(bad)
    assert bulk_report.not_replayable == {SAMPLED_OUT: len(traces) - sum(detail.values())}
    assert [m.request_id for m in bulk_report.mismatches] == bad[:3]  # the oldest three, oldest first
    assert all(m.first_differing_step.endswith(": total") for m in bulk_report.mismatches)


def test_two_processes_give_the_report_of_one(stored: tuple[Any, ...]) -> None:
    db, _, since, until = stored
    one, two = verify_file(db, since, until, workers=1, max_listed=2), verify_file(db, since, until, workers=2,
                                                                                    max_listed=2)
    _same(one, two)
    assert two.mismatched >= 3 and len(two.mismatches) == 2


def test_a_stored_record_that_does_not_load_is_counted_with_its_reason(stored: tuple[Any, ...],
                                                                      tmp_path: Path) -> None:
    db, traces, since, until = stored
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    detail = _detail(db)
    broken = next(t.request_id for i, t in enumerate(traces) if detail[t.request_id] and i not in TAMPERED)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE traces SET latency_ms = -5 WHERE request_id = ?", [broken])  # as no model admits
    con.close()
    report = verify_file(copy, since, until)
    store = DuckDBTraceStore(copy, read_only=True)
    try:
        paged = verify_range(store, TraceFilter(start=since, end=until))
    finally:
        store.close()
    _same(report, paged)
    assert report.not_replayable[UNREADABLE] == 1 and report.n == len(traces)


def test_the_command_lists_the_same_mismatches_from_the_file_and_the_api(
        stored: tuple[Any, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    db, traces, since, until = stored
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    window = ["replay", "--verify", "--since", since.isoformat(), "--until", until.isoformat(), "--json"]
    assert main([*window, "--db", str(db)]) == 1
    from_file = json.loads(capsys.readouterr().out.splitlines()[-1])
    served_copy = tmp_path / "served.duckdb"
    served_copy.write_bytes(db.read_bytes())
    store = DuckDBTraceStore(served_copy)
    try:
        with served(store, tmp_path / "spool") as url:
            assert main([*window, "--api", url]) == 1
    finally:
        store.close()
    from_api = json.loads(capsys.readouterr().out.splitlines()[-1])
    from_file.pop("elapsed_s"), from_api.pop("elapsed_s")
    assert from_file == from_api
    listed = [m["request_id"] for m in from_file["mismatches"]]
    order = {t.request_id: i for i, t in enumerate(traces)}
    assert listed == sorted(listed, key=order.__getitem__) and len(listed) == from_file["mismatched"] > 1
