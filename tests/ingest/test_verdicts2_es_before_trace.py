"""A verdict stored in Elasticsearch before its trace is counted, as DuckDB counts it.

The sink copies a trace's context (``trace.*``) into its feedback when it finds the trace; a verdict
that reaches the store first (through another gateway worker, a relay, a file) had none, and every
Elasticsearch read filters feedback on that context: it was counted nowhere, where DuckDB, which
joins feedback to traces when it reads, counted it. The same records, in the same order, now give
the same figures on both stores (the contract server stands in for Elasticsearch).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch import analytics
from ingest.elasticsearch.store import ElasticsearchStore
from schemas import DecisionTrace, Feedback
from schemas.experiments import CompareQuery
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer
from tests.ingest.test_numbers2_verdicts import END, T0, Clock, _figures, _traces


def _verdict(t: DecisionTrace, after_s: int, correct: bool, expected: str | None = None) -> Feedback:
    return Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=after_s), correct=correct,
                    expected_model=expected)


def _records(traces: list[DecisionTrace]) -> list[list[Any]]:
    """Batches in the order they reach the store: verdicts first on some requests, then the traces, then more."""
    other = "some-other-model"
    early = [_verdict(t, 4, i % 3 != 0, t.selected_model if i % 2 else other) for i, t in enumerate(traces[:12])]
    early.append(Feedback(request_id="never-traced", ts=T0 + timedelta(minutes=5), correct=False))
    early.append(_verdict(traces[40], -7200, False))  # stamped two hours before its trace: still its trace's
    late = [_verdict(t, 9, i % 2 == 0, other if i % 3 else None) for i, t in enumerate(traces[20:30])]
    return [early, traces, late]


def _everything(store: Any, traces: list[DecisionTrace]) -> dict[str, Any]:
    """Every figure of feedback the query API gives, over the hour and narrowed to one model."""
    flt = TraceFilter(start=T0, end=END)
    model = flt.model_copy(update={"model": traces[0].selected_model})
    out: dict[str, Any] = {"figures": _figures(store)}
    for name, f in (("all", flt), ("model", model)):
        out[f"buckets-{name}"] = [(b.start, b.feedback, b.misroutes)
                                  for b in store.aggregate(AggregateQuery(filter=f, bucket="5m"))]
        window = store.window_stats(f)
        out[f"window-{name}"] = (window.feedback, window.misroutes)
        out[f"misroutes-{name}"] = [(m.request_id, m.ts, m.trace_ts, m.selected_model, m.expected_model)
                                    for m in store.misroutes(f)]
    sides = store.arm_stats(CompareQuery(a="a", b="b", start=T0, end=END))
    out["sides"] = {k: (s.feedback, s.misroutes, s.expected, s.expected_match) for k, s in sides.items()}
    series = store.experiment_series("arm", "a", "b", AggregateQuery(filter=flt, bucket="5m"))
    out["series"] = {k: [(b.start, b.feedback, b.misroutes) for b in v] for k, v in series.items()}
    return out


@pytest.fixture
def es_store() -> Iterator[ElasticsearchStore]:
    with ContractServer() as server:
        store = ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")
        yield store
        store.close()
    assert server.violations == []


def test_verdicts_stored_before_their_traces_count_on_elasticsearch_as_on_duckdb(
        tmp_path: Path, es_store: ElasticsearchStore) -> None:
    traces = _traces()
    duck = DuckDBTraceStore(tmp_path / "t.duckdb", clock=Clock(T0 + timedelta(hours=3)))  # minutes sealed
    for batch in _records(traces):
        assert duck.write_records(batch).rejected == []
        assert es_store.write_records(batch).rejected == []
    want = _everything(duck, traces)
    duck.close()
    assert set(want["figures"].values()) == {(23, 10)}  # 12 + 1 early (not the untraced one) and 10 late
    assert want["sides"]["a"][2] + want["sides"]["b"][2] == 18  # naming an expected model: 12 early, 6 late
    assert len(want["misroutes-all"]) == 10 and want["misroutes-model"]
    assert _everything(es_store, traces) == want


def test_the_verdicts_before_their_traces_are_read_a_page_at_a_time(
        es_store: ElasticsearchStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analytics, "PAGE", 4)
    traces = _traces()
    es_store.write_records([_verdict(t, 3, t is not traces[5]) for t in traces[:10]])
    es_store.write_records(traces)
    flt = TraceFilter(start=T0, end=END)
    assert es_store.window_stats(flt).feedback == 10
    assert [m.request_id for m in es_store.misroutes(flt)] == [traces[5].request_id]
    [bucket] = es_store.aggregate(AggregateQuery(filter=flt, bucket="1h"))
    assert (bucket.feedback, bucket.misroutes) == (10, 1)
