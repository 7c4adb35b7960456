"""``replay --verify`` over a real DuckDB store: generated decisions, stored with their policies, all reproduced.

The property test of :mod:`tests.router_core.decide.test_exact_replay` goes through the trace's JSON;
this one goes through what storage really does (the fast decoder, Arrow, DuckDB, the snapshot
table, the policies table) and through :func:`app.experiments.verify.verify_range`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.experiments.verify import NOT_STORED, verify_range
from ingest.duckdb.store import DuckDBTraceStore
from router_core.decide.policy_doc import canonical, document_hash, policy_document
from schemas.policy_record import PolicyRecord
from schemas.queries import TraceFilter
from tests.router_core.decide.test_exact_replay import live, situations


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(situations(), min_size=5, max_size=25))
def test_stored_decisions_are_reproduced_under_their_stored_policy(tmp_path_factory: Any, batch: list[Any]) -> None:
    traces, records, seen = [], {}, set()
    for config, rules, state, ctx in batch:
        if ctx.request_id in seen:
            continue
        try:
            trace = live(config, state, ctx)
        except Exception as exc:  # a model the fleet lacks: refused before any decision
            assert type(exc).__name__ == "UnknownModel", exc
            continue
        seen.add(ctx.request_id)
        doc = policy_document(config, rules)
        h = document_hash(doc)
        records[h] = PolicyRecord(policy_hash=h, ts=trace.ts, router_version="t", document=canonical(doc))
        traces.append(trace.model_copy(update={"policy_hash": h}))
    if not traces:
        return
    store = DuckDBTraceStore(Path(tmp_path_factory.mktemp("db")) / "t.duckdb")
    try:
        store.write_records([*records.values(), *traces])
        report = verify_range(store, TraceFilter())
    finally:
        store.close()
    assert report.n == len(traces) and report.mismatches == [], report.mismatches[:3]
    assert report.reproduced == len(traces) and report.not_replayable == {}


def test_a_trace_whose_policy_was_not_stored_is_counted_not_guessed(tmp_path: Path) -> None:
    config, _, state, ctx = _one()
    trace = live(config, state, ctx)
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    try:
        store.write_records([trace])
        report = verify_range(store, TraceFilter())
    finally:
        store.close()
    assert report.n == 1 and report.reproduced == 0 and report.not_replayable == {NOT_STORED: 1}


def _one() -> tuple[Any, Any, Any, Any]:
    from router_core.decide.decision import DecisionContext
    from router_core.state.quality import QualityTable
    from tests.router_core.conftest import NOW, features, healthy, make_config

    config = make_config()
    ctx = DecisionContext(request_id="r1", features=features(), intent="chat", now=NOW,
                          quality=QualityTable(config.models).snapshot())
    return config, None, healthy(), ctx
