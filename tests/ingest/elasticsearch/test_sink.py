"""The Elasticsearch sink against the contract server: every request is checked against the
official OpenAPI file (the es_server fixture fails the test on any violation)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.synthetic import TraceFactory
from ingest.elasticsearch.sink import ElasticsearchSink
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.errors import SinkUnavailable
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from ingest.record_sink import PreparedBatch, RecordBatch
from schemas import Feedback
from schemas.config.storage import StorageSettings
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer


def es_store(server: ContractServer, **kw: object) -> ElasticsearchStore:
    return ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true", **kw)  # type: ignore[arg-type]


def test_templates_make_data_streams_with_a_lifecycle_and_a_derived_mapping(es_server: ContractServer,
                                                                            factory: TraceFactory) -> None:
    store = es_store(es_server, retention_days=7)
    store.write_records([factory.trace()])
    tpl = es_server.engine.templates["routelens-traces"]
    assert tpl["index_patterns"] == ["routelens-traces*"] and tpl["data_stream"] == {}
    assert tpl["template"]["lifecycle"] == {"data_retention": "7d"}
    props = tpl["template"]["mappings"]["properties"]
    assert props["request_id"]["type"] == "keyword" and props["query_hash"]["type"] == "keyword"
    assert props["ts"]["type"] == props["@timestamp"]["type"] == "date_nanos"
    assert props["candidates"]["type"] == "nested" and props["outcome"]["properties"]["total_ms"]["type"] == "double"
    assert set(es_server.engine.templates) == {f"routelens-{t}" for t in
                                               ("traces", "instance_snapshots", "probe_results", "router_events",
                                                "feedback", "quarantine", "policies")}
    assert es_server.engine.templates["routelens-policies"]["template"]["lifecycle"] == {"enabled": True}
    store.close()


def test_redelivery_is_idempotent_by_id(es_server: ContractServer, factory: TraceFactory) -> None:
    store = es_store(es_server)
    traces = list(factory.traces(5))
    store.write_records(traces[:3])
    again = store.write_records(traces)
    assert again.by_kind[Kind.TRACE] == [2, 3] and es_server.count("routelens-traces") == 5
    store.close()


def test_items_answered_429_are_retried_with_backoff(es_server: ContractServer, factory: TraceFactory) -> None:
    store = es_store(es_server)
    es_server.faults.item_429 = 4
    result = store.write_records(list(factory.traces(6)))
    assert result.by_kind[Kind.TRACE] == [6, 0] and es_server.count("routelens-traces") == 6
    assert sum(1 for m, p in es_server.requests if p == "/_bulk") >= 2
    store.close()


def test_a_whole_request_refused_is_retryable(es_server: ContractServer, factory: TraceFactory) -> None:
    store = es_store(es_server)
    store.write_records([factory.trace()])  # templates in place
    es_server.faults.whole = [503]
    with pytest.raises(SinkUnavailable):
        store.write_records([factory.trace()])
    store.close()


def test_the_pipeline_quarantines_refused_items_and_rides_out_an_outage(
    es_server: ContractServer, factory: TraceFactory, tmp_path: Path
) -> None:
    store = es_store(es_server)
    traces = list(factory.traces(30))
    es_server.faults.refuse_ids = {traces[7].request_id}
    es_server.faults.whole = [503, 503, 429, 503]
    st = StorageSettings(batch_size=8, flush_interval_ms=5)
    em = TraceEmitter(store, st, spool_dir=tmp_path / "spool", quarantine=Quarantine(tmp_path / "q"),
                      sleep=lambda s: None).start()
    for t in traces:
        em.emit(t)
    assert em.flush(30)
    em.close()
    stored = set(es_server.engine.streams["routelens-traces"])
    assert stored == {t.request_id for t in traces} - {traces[7].request_id}
    assert em.stats.sink_errors >= 1 and em.stats.quarantined == 1
    (q,) = es_server.engine.streams["routelens-quarantine"].values()
    assert q["request_id"] == traces[7].request_id and "document_parsing_exception" in q["reason"]


def test_feedback_carries_its_trace_context_even_from_a_fresh_sink(es_server: ContractServer) -> None:
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    traces = list(TraceFactory(seed=3, start=t0).traces(4))
    es_store(es_server).write_records(traces)
    fresh = es_store(es_server)  # empty context cache: looks the traces up
    fresh.write_records([Feedback(request_id=t.request_id, ts=t0 + timedelta(minutes=1), correct=i > 0)
                         for i, t in enumerate(traces)])
    doc = es_server.engine.streams["routelens-feedback"]
    assert all(d["trace"]["router_version"] == "routelens-0.1.0" for d in doc.values())
    (bucket,) = fresh.aggregate(AggregateQuery(filter=TraceFilter(start=t0, end=t0 + timedelta(hours=1))))
    assert (bucket.feedback, bucket.misroutes) == (4, 1)
    fresh.close()


def test_feedback_context_is_looked_up_in_searches_of_at_most_10000_ids() -> None:
    class Client:
        def __init__(self) -> None:
            self.sizes: list[int] = []

        def search(self, *, size: int, query: dict[str, Any], **_: Any) -> dict[str, Any]:
            assert size == len(query["terms"]["request_id"])
            self.sizes.append(size)
            return {"hits": {"hits": []}}

    client = Client()
    sink = ElasticsearchSink(client)  # type: ignore[arg-type]
    prepared = PreparedBatch(RecordBatch())
    prepared.tables[Kind.FEEDBACK] = [("", {"request_id": f"req_{i:05d}"}) for i in range(25_000)]
    sink._add_feedback_context(prepared)
    assert client.sizes == [10_000, 10_000, 5_000]
