"""``replay --db`` over a trace file from before columns existed (opened read-only, never migrated).

The bulk reader (``--policy``) and the store's reads (``--verify``) over a file written today and
then made older (:func:`tests.ingest.duckdb.test_older_file_store.make_older`): what the older
layout lacked reads as not recorded, and the summary says why there is no inverse-propensity
estimate instead of "0 logged requests match".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.experiments import bulk
from app.experiments.rows import ReplayRow
from bench.replay_traces import fleet_config
from ingest.duckdb.store import DuckDBTraceStore
from router_core.decide.policy_doc import canonical, document_hash, policy_document
from schemas.policy_record import PolicyRecord
from schemas.queries import TraceFilter
from tests.app.experiments.seed import STATE_ONLY, T0, decided, policy_yaml, store_traces
from tests.ingest.duckdb.test_older_file_store import LAYOUT_2026_11_30, make_older

N = 120
SINCE, UNTIL = T0.isoformat(), "2026-11-02T00:00:00Z"
# The layout of 2026-12-02 (the auditor's second file): policies stored, no otel_* nor inputs yet.
LAYOUT_2026_12_02: dict[str, list[str]] = {
    "traces": ["arm_forced", "inputs", "otel_trace_id", "otel_span_id", "otel_parent_span_id", "otel_trace_flags",
               "otel_trace_state", "candidates.element.probability", "attempts.element.span_id",
               "attempts.element.start_ms"],
    "instance_snapshots": ["warmup_source"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Today's file and a copy of it in the layout of 2026-11-30."""
    today = store_traces(tmp_path_factory.mktemp("replay") / "today.duckdb", decided(N))
    older = today.with_name("older.duckdb")
    older.write_bytes(today.read_bytes())
    make_older(older, LAYOUT_2026_11_30)
    return today, older


def _rows(path: Path, flt: TraceFilter) -> list[ReplayRow]:
    con = bulk.open_file(path)
    try:
        return [row for batch in bulk.read_rows(con, flt, batch_rows=50) for row in batch]
    finally:
        con.close()


def _decision_inputs(row: ReplayRow) -> tuple[Any, ...]:
    return (row.request_id, row.ts, row.features, row.intent, row.rule, row.model, row.instance, row.states,
            row.candidates, [list(t) for t in row.terms], row.weights, row.cost, row.missing, row.misroute)


def test_the_bulk_reads_are_todays_less_what_was_never_recorded(files: tuple[Path, Path]) -> None:
    today, older = files
    flt = TraceFilter(start=T0, end=T0.replace(day=2))
    want, got = _rows(today, flt), _rows(older, flt)
    assert len(got) == N and [_decision_inputs(r) for r in got] == [_decision_inputs(r) for r in want]
    assert all(r.selection_probability is not None for r in want if r.instance is not None)
    assert all(r.selection_probability is None and r.settled is None for r in got)
    for path in files:
        con = bulk.open_file(path)
        try:
            assert bulk.count(con, flt) == N
            points = bulk.split_points(con, flt, 3)
            assert len(points) == 2 and points == sorted(points)
        finally:
            con.close()


def test_replay_policy_over_the_older_file_says_why_there_is_no_ips_estimate(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = policy_yaml(tmp_path / "same.yaml", fleet_config(scoring=STATE_ONLY))
    code = main(["replay", "--since", SINCE, "--until", UNTIL, "--policy", str(same), "--db", str(files[1]),
                 "--workers", "1", "--json", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out.strip().splitlines()[-1])
    assert report["n"] == N and report["flip_rate"] == 0.0
    for name in ("cost_per_request", "misroute_rate"):
        est = report["ips"][name]
        assert est["value"] is None and est["n"] == 0
        assert est["note"].startswith("the traces carry no selection probability")
    err = " ".join(captured.err.split())
    assert "inverse-propensity cost_per_request: the traces carry no selection probability" in err
    assert "0 logged requests match" not in err


def test_replay_verify_reads_a_file_from_before_the_otel_columns(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from router_core.decide.decision import DecisionContext
    from router_core.state.quality import QualityTable
    from tests.router_core.conftest import NOW, features, healthy, make_config
    from tests.router_core.decide.test_exact_replay import live

    config = make_config()
    doc = policy_document(config, None)
    h = document_hash(doc)
    traces = [live(config, healthy(), DecisionContext(request_id=f"r{i}", features=features(), intent="chat",
                                                      now=NOW, quality=QualityTable(config.models).snapshot()))
              .model_copy(update={"policy_hash": h}) for i in range(6)]
    path = tmp_path / "older.duckdb"
    store = DuckDBTraceStore(path)
    store.write_records([PolicyRecord(policy_hash=h, ts=NOW, router_version="t", document=canonical(doc)), *traces])
    store.close()
    make_older(path, LAYOUT_2026_12_02)
    code = main(["replay", "--verify", "--since", NOW.isoformat(), "--until", NOW.replace(year=NOW.year + 1)
                 .isoformat(), "--db", str(path), "--json", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out.strip().splitlines()[-1])
    assert report["n"] == report["reproduced"] == 6 and report["mismatches"] == []
