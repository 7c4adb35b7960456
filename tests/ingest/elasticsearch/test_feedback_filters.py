"""Every field of a TraceFilter narrows the feedback Elasticsearch counts as it narrows DuckDB's.

Feedback documents carry their trace's context (``trace.*``), but not its candidates nor its W3C
trace id: Elasticsearch's feedback reads skipped ``violation`` (counting the feedback of every
trace) and filtered ``otel_trace_id`` on a field no feedback holds (counting none). Each field alone,
and with others, against a DuckDB file holding the same records (minutes unsealed: the traces
answer), on every read that counts feedback: buckets, the window, misroutes, the experiment series.
``unset`` (a rule, model or instance left empty) too: some traces have none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch.analytics import ElasticsearchAnalytics
from ingest.elasticsearch.filters import carried, filter_query
from ingest.elasticsearch.store import ElasticsearchStore
from schemas import DecisionTrace, Feedback, query_hash
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
END = T0 + timedelta(hours=1)
OTEL = "4bf92f3577b34da6a3ce929d0e0e4736"
SHARED_QUERY = query_hash("the same question, asked again")


class Clock:
    def __call__(self) -> datetime:
        return T0  # nothing sealed: DuckDB answers from the traces, the reference for every filter


def _trace(f: TraceFactory, i: int) -> DecisionTrace:
    t = f.trace(experiment_arm="a" if i % 2 else "b", router_version="v2" if i % 5 == 0 else "v1",
                fallback_triggered=i % 7 == 0)
    if i % 5 == 1:
        t = t.model_copy(update={"query_hash": SHARED_QUERY})
    if i % 6 == 0:
        t = t.model_copy(update={"otel_trace_id": OTEL})
    if i % 8 == 3:
        t = t.model_copy(update={"outcome": t.outcome.model_copy(update={"status": "error"})})
    if i % 7 == 4:
        t = t.model_copy(update={"rule": None})
    if i % 10 == 7:
        t = t.model_copy(update={"selected_model": None, "selected_instance": None})
    if i % 11 == 5:
        t = t.model_copy(update={"selected_instance": None})
    return t


FACTORY = TraceFactory(seed=3, n_candidates=4, round_every=1, start=T0, step=timedelta(seconds=40))
TRACES = [_trace(FACTORY, i) for i in range(90)]
# A verdict on every third request and on the first 12: those stored before their trace (no context), the rest after.
VERDICTS = [Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=30), correct=i % 4 > 1,
                     expected_model=t.selected_model if i % 4 else "elsewhere")
            for i, t in enumerate(TRACES) if i % 3 == 0 or i < 12]
EARLY = [v for v in VERDICTS if v.request_id in {t.request_id for t in TRACES[:12]}]
LATE = [v for v in VERDICTS if v not in EARLY]
T1 = TRACES[1]
ONE_FIELD = {
    "router_version": "v2", "experiment_arm": "a", "rule": T1.rule, "model": T1.selected_model,
    "instance": T1.selected_instance, "fallback": True, "outcome": "error", "query_hash": SHARED_QUERY,
    "otel_trace_id": OTEL, "min_latency_ms": 500.0, "max_latency_ms": 900.0, "violation": "kv-cache",
    "unset": ["instance"],
}
COMBINED = [{"violation": "kv-cache", "experiment_arm": "a"}, {"violation": "kv-cache", "rule": T1.rule},
            {"otel_trace_id": OTEL, "min_latency_ms": 300.0}, {"violation": "kv-cache", "otel_trace_id": OTEL},
            {"unset": ["rule"]}, {"unset": ["model", "instance"]}, {"unset": ["instance"], "experiment_arm": "a"},
            {"unset": ["rule"], "violation": "kv-cache"}, {"unset": ["instance"], "otel_trace_id": OTEL}]
FILTERS = [{name: value} for name, value in ONE_FIELD.items()] + COMBINED


def _ids(fields: dict[str, Any]) -> str:
    return "+".join(fields)


def _write(store: Any) -> None:
    for batch in (EARLY, TRACES, LATE):
        assert store.write_records(batch).rejected == []


def _feedback_figures(store: Any, flt: TraceFilter) -> dict[str, Any]:
    out: dict[str, Any] = {
        "buckets": [(b.start, b.requests, b.feedback, b.misroutes)
                    for b in store.aggregate(AggregateQuery(filter=flt, bucket="15m"))],
        "misroutes": [(m.request_id, m.ts, m.trace_ts, m.selected_model, m.selected_instance, m.rule)
                      for m in store.misroutes(flt)],
        "misroutes-2": [m.request_id for m in store.misroutes(flt, limit=2)],
        "series": {k: [(b.start, b.requests, b.feedback, b.misroutes) for b in v] for k, v in
                   store.experiment_series("arm", "a", "b", AggregateQuery(filter=flt, bucket="15m")).items()},
    }
    window = store.window_stats(flt)
    out["window"] = None if window is None else (window.requests, window.feedback, window.misroutes)
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DuckDBTraceStore, ElasticsearchStore]]:
    duck = DuckDBTraceStore(tmp_path_factory.mktemp("db") / "t.duckdb", clock=Clock())
    _write(duck)
    with ContractServer() as server:
        es = ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")
        _write(es)
        yield duck, es
        es.close()
    duck.close()
    assert server.violations == []


@pytest.mark.parametrize("fields", FILTERS, ids=_ids)
def test_feedback_is_narrowed_by_every_filter_field_as_on_duckdb(
        stores: tuple[DuckDBTraceStore, ElasticsearchStore], fields: dict[str, Any]) -> None:
    duck, es = stores
    flt = TraceFilter(start=T0, end=END, **fields)
    want = _feedback_figures(duck, flt)
    everything = duck.window_stats(TraceFilter(start=T0, end=END))
    assert want["window"] is not None and everything is not None
    assert 0 < want["window"][1] < everything.feedback, "the filter must keep some feedback, not all"
    assert want["misroutes"], "and some misroutes"
    assert _feedback_figures(es, flt) == want


@pytest.mark.parametrize(("fields", "carried_part", "from_traces"), [
    ({"otel_trace_id": OTEL}, lambda t: True, True),  # 15 traces, 26 verdicts with context: the traces' verdicts
    ({"violation": "kv-cache"}, lambda t: True, False),  # 42 traces with the violation: the verdicts
    ({"violation": "kv-cache", "experiment_arm": "b"}, lambda t: t.experiment_arm == "b", False),
    ({"violation": "kv-cache", "otel_trace_id": OTEL}, lambda t: True, True),
], ids=["one-w3c-trace", "a-common-violation", "a-violation-on-one-arm", "a-violation-in-one-w3c-trace"])
def test_a_join_reads_the_side_holding_fewer_documents(
        stores: tuple[DuckDBTraceStore, ElasticsearchStore], fields: dict[str, Any],
        carried_part: Callable[[DecisionTrace], bool], from_traces: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    duck, es = stores
    flt = TraceFilter(start=T0, end=END, **fields)
    want = duck.window_stats(flt)
    assert want is not None
    on = {t.request_id for t in TRACES if carried_part(t)}
    assert (want.requests <= sum(1 for v in LATE if v.request_id in on)) is from_traces  # LATE: with context
    calls: list[str] = []
    of_traces = ElasticsearchAnalytics._verdicts_of_traces

    def spy(self: ElasticsearchAnalytics, *args: Any) -> Any:
        calls.append("traces")
        return of_traces(self, *args)

    monkeypatch.setattr(ElasticsearchAnalytics, "_verdicts_of_traces", spy)
    got = es.window_stats(flt)
    assert got is not None and (got.requests, got.feedback, got.misroutes) == (want.requests, want.feedback,
                                                                                 want.misroutes)
    assert calls == (["traces"] if from_traces else [])


def test_the_wider_feedback_query_of_an_uncarried_filter_keeps_what_the_context_answers() -> None:
    flt = TraceFilter(start=T0, rule="r", otel_trace_id=OTEL, violation="kv-cache", min_latency_ms=1.0)
    assert not carried(flt) and carried(flt.model_copy(update={"otel_trace_id": None, "violation": None}))
    fields = [next(iter(next(iter(c.values())))) for c in filter_query(flt, "trace.")["bool"]["filter"]]
    assert fields == ["trace.rule", "trace.ts", "trace.total_ms"]
