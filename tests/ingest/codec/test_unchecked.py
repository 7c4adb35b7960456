"""Traces written unvalidated from the recorder's values, validated by the storing sink."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.synthetic import TraceFactory
from ingest.codec.encoder import Encoder
from ingest.codec.unchecked import check_traces, stored_form_error
from ingest.duckdb.store import DuckDBTraceStore
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from ingest.record_sink import RecordBatch
from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.state.quality import QualityTable
from schemas import AttemptStatus, Outcome, OutcomeStatus
from schemas.config.storage import StorageSettings
from schemas.trace import Attempt, DecisionTrace
from tests.ingest.plain_values import plain_of
from tests.polling import wait_until
from tests.router_core.conftest import NOW, features, healthy, make_config, snap

OUTCOME = Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=2.5, prompt_tokens=12, completion_tokens=3)
CONSTRAINTS = [{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85, "enter_below": 0.8,
                "soft_threshold": 0.6}, {"name": "queue", "metric": "queue", "threshold": 6}]
STATES = {
    "healthy": healthy(),
    "soft-and-hard-verdicts": healthy() | {"big-a": snap("big-a", kv=0.7), "small-a": snap("small-a", queue=9)},
    "nothing-feasible": {iid: snap(iid, kv=0.95) for iid in healthy()},
    "stale": healthy() | {"big-b": snap("big-b", age=12.0)},
}


def recorders() -> Iterator[tuple[str, TraceRecorder]]:
    """Real decisions of the builtin router (verdicts, soft factors, fallbacks, stale state), with attempts."""
    config = make_config(constraints=CONSTRAINTS)
    router = build_router(config)
    for name, state in STATES.items():
        for attempts in ([("big-b", 200)], [("big-a", 503), ("small-a", 200)], []):
            rec = TraceRecorder(request_id=f"r-{name}-{len(attempts)}", ts=NOW + timedelta(seconds=1),
                                router_version="t", policy_hash=router.policy.hash,
                                query_hash="sha256:" + "0" * 64, features=features(), intent="chat",
                                intent_confidence=0.75)
            ctx = DecisionContext(request_id=rec.request_id, features=rec.features, intent="chat", now=rec.ts,
                                  quality=QualityTable(config.models).snapshot())
            rec.record_decision(router.decide(ctx, state))
            rec.record_attempts([Attempt(seq=i, instance=iid, model="big" if iid.startswith("big") else "small",
                                         status=AttemptStatus.OK if code < 400 else AttemptStatus.HTTP_ERROR,
                                         http_status=code, latency_ms=1.5) for i, (iid, code) in enumerate(attempts)])
            yield f"{name}-{len(attempts)}-attempts", rec


@pytest.mark.parametrize("case", list(recorders()), ids=lambda c: c[0])
def test_a_recorders_plain_values_encode_to_the_bytes_of_its_validated_trace(case: tuple[str, TraceRecorder]) -> None:
    _, rec = case
    plain = Encoder().plain_trace(rec.plain(OUTCOME))
    checked = Encoder().encode(rec.finish(OUTCOME))
    assert [k for k, _ in plain] == [k for k, _ in checked[:-1]] + [Kind.TRACE_UNCHECKED]
    assert [p for _, p in plain] == [p for _, p in checked]  # snapshots first, then the trace: byte for byte


def test_generated_traces_encode_the_same_either_way() -> None:
    for detail_share in (1.0, 0.3):
        for trace in TraceFactory(seed=11, n_candidates=6, round_every=4).traces(200):
            want, got = Encoder(detail_share).encode(trace), Encoder(detail_share).plain_trace(plain_of(trace))
            assert [p for _, p in got] == [p for _, p in want]


def _unchecked(trace: DecisionTrace, **changes: Any) -> bytes:
    values = plain_of(trace) | changes
    return Encoder().plain_trace(values)[-1][1]


def test_the_sink_side_check_passes_valid_traces_on_and_refuses_the_rest_with_the_reason() -> None:
    good, other = TraceFactory(seed=2, n_candidates=3).traces(2)
    bad = _unchecked(good, latency_ms=-1.0, request_id="bad")
    batch = RecordBatch({Kind.TRACE: [b"already-checked"], Kind.TRACE_UNCHECKED: [_unchecked(good), bad, b"{nope"]})
    rejected = check_traces(batch).rejected
    assert batch.payloads == {Kind.TRACE: [b"already-checked", _unchecked(good)]}
    assert [(r.kind, r.payload) for r in rejected] == [(Kind.TRACE, bad), (Kind.TRACE, b"{nope")]
    assert "latency_ms" in rejected[0].reason and "greater than or equal to 0" in rejected[0].reason
    assert "validation error for DecisionTrace" in rejected[0].reason and "Invalid JSON" in rejected[1].reason
    assert stored_form_error(_unchecked(other)) is None
    assert "Input should be an object" in (stored_form_error(b"[1]") or "")
    only_bad = RecordBatch({Kind.TRACE_UNCHECKED: [bad]})
    assert len(check_traces(only_bad).rejected) == 1 and only_bad.payloads == {}


def test_plain_traces_are_stored_validated_read_back_and_the_invalid_one_is_quarantined(tmp_path: Path) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    emitter = TraceEmitter(store, StorageSettings(batch_size=16, flush_interval_ms=5), spool_dir=tmp_path / "spool",
                           quarantine=Quarantine(tmp_path / "q")).start()
    try:
        traces = list(TraceFactory(seed=4, n_candidates=4, round_every=3).traces(30))
        for trace in traces:
            assert emitter.emit_plain(plain_of(trace))
        invalid = plain_of(traces[0]) | {"request_id": "r-invalid", "intent_confidence": 1.5}
        assert emitter.emit_plain(invalid)  # durable at once; judged where it is stored
        assert emitter.pending(traces[5].request_id) == traces[5]  # read-your-writes, validated when asked
        assert emitter.pending("r-invalid") is None
        assert emitter.flush(30)
        assert store.count(Kind.TRACE) == 30 and store.get("r-invalid") is None
        back = store.get(traces[5].request_id)
        assert back is not None and back.model_dump() == traces[5].model_dump()
        # the sink's refusal is quarantined through the pipeline after the flush's records: poll for it
        (q,) = wait_until(lambda: store.quarantined(NOW - timedelta(days=3650), NOW + timedelta(days=3650)), 30)
        assert (q.kind, q.request_id, q.source) == ("trace", "r-invalid", "sink") and "intent_confidence" in q.reason
        assert "r-invalid" in orjson.loads(q.raw or "{}").get("request_id", "")
    finally:
        emitter.close()
        store.close()


def test_an_oversized_plain_trace_is_quarantined_at_once_with_its_reason(tmp_path: Path) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    st = StorageSettings(flush_interval_ms=5)
    st = st.model_copy(update={"spool": st.spool.model_copy(update={"max_record_bytes": 1024})})
    emitter = TraceEmitter(store, st, spool_dir=tmp_path / "spool", quarantine=Quarantine(tmp_path / "q")).start()
    try:
        (trace,) = TraceFactory(seed=6, n_candidates=8).traces(1)
        assert not emitter.emit_plain(plain_of(trace))
        assert emitter.flush(30) and store.count(Kind.TRACE) == 0
        found = wait_until(lambda: store.quarantined(NOW - timedelta(days=3650), NOW + timedelta(days=3650)), 30)
        assert {(q.kind, q.source) for q in found} >= {("trace", "emit")}
        assert any("exceeds the limit of 1024" in q.reason and q.request_id == trace.request_id for q in found)
    finally:
        emitter.close()
        store.close()
