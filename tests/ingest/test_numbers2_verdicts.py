"""One verdict per request id, in the store as at the gateway: a later verdict is quarantined and counted nowhere.

The gateway answers a second verdict 409, but its feedback-once set starts again after a restart, and
two gateways (or a file, or a relay) may feed one store. The store keeps the first verdict (of those
stored together, the earliest by ``ts``) and returns every other one for quarantine; a verdict
delivered again is a duplicate. Every reader then counts one verdict per request: the live
aggregate over the traces, the rollup's sealed minutes (whenever the verdict came), ``compare`` and
the experiment series, on DuckDB (a real file) and on Elasticsearch (the contract server). A file
written before the rule keeps each request's earliest verdict on open and quarantines the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.record_sink import verdict_reason
from schemas import DecisionTrace, Feedback
from schemas.config.storage import StorageSettings
from schemas.experiments import CompareQuery
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
END = T0 + timedelta(hours=1)
REASON = "is stored already (one verdict per request: the first one counts)"


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _traces() -> list[DecisionTrace]:
    f = TraceFactory(seed=4, n_candidates=2, start=T0 + timedelta(seconds=3), step=timedelta(seconds=50))
    return [f.trace(experiment_arm="a" if i % 2 else "b") for i in range(60)]


def _verdict(t: DecisionTrace, after_s: int, correct: bool) -> Feedback:
    return Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=after_s), correct=correct)


def _figures(store: Any) -> dict[str, tuple[int, int]]:
    """(feedback, misroutes) as each reader counts them over the hour."""
    flt = TraceFilter(start=T0, end=END)
    out = {}
    for name, f in (("buckets", flt), ("traces", flt.model_copy(update={"min_latency_ms": 0.0}))):
        bs = store.aggregate(AggregateQuery(filter=f, bucket="1h"))
        out[name] = (sum(b.feedback for b in bs), sum(b.misroutes for b in bs))
    sides = store.arm_stats(CompareQuery(a="a", b="b", start=T0, end=END))
    out["compare"] = (sum(s.feedback for s in sides.values()), sum(s.misroutes for s in sides.values()))
    series = store.experiment_series("arm", "a", "b", AggregateQuery(filter=flt, bucket="1h"))
    out["series"] = (sum(b.feedback for s in series.values() for b in s), sum(b.misroutes for s in series.values()
                                                                             for b in s))
    return out


def _same_everywhere(store: Any, feedback: int, misroutes: int) -> None:
    assert set(_figures(store).values()) == {(feedback, misroutes)}, _figures(store)


def _refused(result: Any) -> list[str]:
    return [r.reason for r in result.rejected if r.kind is Kind.FEEDBACK]


@pytest.mark.parametrize("sealed", [False, True], ids=["live", "late-on-sealed-minutes"])
def test_a_second_verdict_on_duckdb_is_refused_and_counted_by_no_reader(tmp_path: Path, sealed: bool) -> None:
    """It was stored: a request said right then wrong counted two feedback and one misroute in every reader."""
    traces = _traces()
    clock = Clock(T0 + timedelta(minutes=30))
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=clock)
    store.write_records(traces)
    assert _refused(store.write_records([_verdict(t, 5, True) for t in traces[:10]])) == []
    if sealed:  # the traces' minutes are rolled up before the second verdicts come
        clock.now = T0 + timedelta(hours=3)
        store.write_records([_verdict(traces[20], 5, False)])
    second = store.write_records([_verdict(t, 9, False) for t in traces[:10]])
    assert len(second.rejected) == 10 and all(REASON in r for r in _refused(second))
    again = store.write_records([_verdict(traces[0], 5, True)])  # the first verdict delivered again
    assert again.rejected == [] and again.by_kind[Kind.FEEDBACK] == [0, 1]
    _same_everywhere(store, 10 + sealed, sealed)
    assert [f.correct for f in store.feedback(traces[0].request_id)] == [True]
    store.close()


def test_in_one_batch_the_earliest_verdict_counts_whatever_the_order(tmp_path: Path) -> None:
    traces = _traces()
    store = DuckDBTraceStore(tmp_path / "t.duckdb", clock=lambda: T0 + timedelta(minutes=30))
    store.write_records(traces)
    # Before their traces are stored, later first in the batch: the earlier one (wrong) is kept.
    out = store.write_records([_verdict(traces[1], 9, True), _verdict(traces[1], 4, False),
                               _verdict(traces[2], 4, True), _verdict(traces[2], 4, True)])
    assert len(out.rejected) == 1 and out.by_kind[Kind.FEEDBACK] == [2, 1]
    _same_everywhere(store, 2, 1)
    store.close()


def test_the_pipeline_quarantines_a_later_verdict_with_its_reason(tmp_path: Path) -> None:
    traces = _traces()[:4]
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    em = TraceEmitter(store, StorageSettings(batch_size=16, flush_interval_ms=5), spool_dir=tmp_path / "spool",
                      sleep=lambda s: None).start()
    try:
        for record in [*traces, _verdict(traces[0], 5, True)]:
            em.emit(record)
        assert em.flush()
        em.emit(_verdict(traces[0], 60, False))  # as after a gateway restart: its feedback-once set is empty
        assert em.flush()
    finally:
        em.close()
    [kept] = store.feedback(traces[0].request_id)
    assert kept.correct
    held = [q for q in store.quarantined(T0 - timedelta(days=1), datetime.now(UTC) + timedelta(days=1))
            if q.kind == "feedback"]
    assert len(held) == 1 and f"request_id {traces[0].request_id!r} {REASON}" in held[0].reason
    assert held[0].request_id == traces[0].request_id  # filed under its request, not its feedback_id
    assert held[0].raw is not None and '"correct":false' in held[0].raw
    store.close()


def _older_file(path: Path, traces: list[DecisionTrace], clock: Clock) -> None:
    """A file as a version before the rule left it: two verdicts on some requests, its rollup sealed with them."""
    store = DuckDBTraceStore(path, clock=clock)
    store.write_records(traces)
    store._connect().execute("DROP INDEX IF EXISTS feedback_request_id_key")
    for i, t in enumerate(traces[:6]):
        store.write_records([_verdict(t, 5, True)])
        store.write_records([_verdict(t, 8 + i, False)])  # stored too: no index said otherwise
    clock.now = T0 + timedelta(hours=3)
    store.write_records([_verdict(traces[7], 5, False)])  # and the minutes sealed, counting both
    store.close()


def test_an_older_file_keeps_the_earliest_verdict_and_quarantines_the_rest_on_open(tmp_path: Path) -> None:
    path, traces, clock = tmp_path / "t.duckdb", _traces(), Clock(T0 + timedelta(minutes=30))
    _older_file(path, traces, clock)
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM feedback").fetchall() == [(13,)]
    assert con.execute("SELECT sum(feedback) FROM traffic_minutes").fetchall() == [(13,)]  # the old count
    con.close()
    store = DuckDBTraceStore(path, clock=clock)
    _same_everywhere(store, 7, 1)  # six right, one wrong; the six later "wrong" are out of every count
    held = store.quarantined(T0, T0 + timedelta(days=1))
    assert sorted(q.request_id or "" for q in held) == sorted(t.request_id for t in traces[:6])
    assert all(q.source == "migration" and '"correct":false' in (q.raw or "") for q in held)
    assert [q.reason for q in held] == [verdict_reason(q.request_id or "") for q in held]  # every store's words
    migrated = store._rows("SELECT statement FROM routelens_migrations WHERE statement LIKE '%quarantine%'", [])
    assert len(migrated) == 1
    store.close()
    reopened = DuckDBTraceStore(path, clock=clock)  # once: nothing moves again
    assert len(reopened.quarantined(T0, T0 + timedelta(days=1))) == 6
    _same_everywhere(reopened, 7, 1)
    reopened.close()


@pytest.fixture
def es_store() -> Iterator[ElasticsearchStore]:
    with ContractServer() as server:
        store = ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")
        store.server = server  # type: ignore[attr-defined]
        yield store
        store.close()
    assert server.violations == []


def test_a_second_verdict_on_elasticsearch_is_refused_and_counted_by_no_reader(es_store: ElasticsearchStore) -> None:
    traces = _traces()
    es_store.write_records(traces)
    assert _refused(es_store.write_records([_verdict(t, 5, True) for t in traces[:10]])) == []
    second = es_store.write_records([_verdict(t, 9, False) for t in traces[:10]]
                                    + [_verdict(traces[11], 9, True), _verdict(traces[11], 4, False)])
    assert len(second.rejected) == 11 and all(REASON in r for r in _refused(second))
    again = es_store.write_records([_verdict(traces[0], 5, True)])
    assert again.rejected == [] and again.by_kind[Kind.FEEDBACK] == [0, 1]
    _same_everywhere(es_store, 11, 1)
    assert [f.correct for f in es_store.feedback(traces[11].request_id)] == [False]


def test_elasticsearch_refuses_a_verdict_on_a_request_an_older_version_stored_one_for(
        es_store: ElasticsearchStore) -> None:
    """Before the rule a verdict's ``_id`` was its feedback_id: a new one under the request id did not collide."""
    traces = _traces()
    es_store.write_records(traces)
    es_store.write_records([_verdict(traces[0], 5, True)])
    engine = es_store.server.engine  # type: ignore[attr-defined]
    docs = engine.streams["routelens-feedback"]
    doc = docs.pop(next(k for k, d in docs.items() if d["request_id"] == traces[0].request_id))
    docs[doc["feedback_id"]] = doc  # as an older version keyed it
    out = es_store.write_records([_verdict(traces[0], 30, False)])
    assert len(out.rejected) == 1 and REASON in out.rejected[0].reason
    _same_everywhere(es_store, 1, 0)
