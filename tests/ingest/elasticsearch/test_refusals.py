"""Which bulk item refusals are the document's fault (quarantined) and which the sink's (retried, nothing lost).

Against the contract server: Elasticsearch answers a bulk request 200 with a status per item, and
only a 400 mapping or parse error says the document itself is bad. An API key without write
rights (401/403), a missing index (404), an overloaded (429) or failing (5xx) node refuse every
item alike: a quarantine then would file every trace, and the quarantine records after them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bench.synthetic import TraceFactory
from ingest.codec.encoder import encode_batch
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.errors import SinkUnavailable
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.metrics import EmitterCollector
from ingest.pipeline.quarantine import Quarantine
from schemas.config.storage import StorageSettings
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer

SETTINGS = StorageSettings(batch_size=8, flush_interval_ms=5)

SINK_FAULTS = [(401, "security_exception"), (403, "security_exception"), (404, "index_not_found_exception"),
               (429, "es_rejected_execution_exception"), (500, "exception"), (503, "unavailable_shards_exception"),
               (400, "index_closed_exception")]
DOCUMENT_FAULTS = ["mapper_parsing_exception", "document_parsing_exception", "illegal_argument_exception"]


def es_store(server: ContractServer) -> ElasticsearchStore:
    return ElasticsearchStore(es_client(server.url), max_retries=1, initial_backoff_s=0.01, refresh="true")


@pytest.mark.parametrize(("status", "kind"), SINK_FAULTS, ids=[f"{s}-{k}" for s, k in SINK_FAULTS])
def test_items_refused_for_the_sinks_reasons_are_retried_not_rejected(
    es_server: ContractServer, factory: TraceFactory, status: int, kind: str
) -> None:
    store = es_store(es_server)
    es_server.faults.item_refusal = (status, kind)
    records = list(factory.traces(3))
    n = len(encode_batch(records))  # the traces and their scrape round's snapshots
    with pytest.raises(SinkUnavailable, match=rf"did not store {n} items.*\({n} x {status} {kind}: scripted"):
        store.write_records(records)
    store.close()


@pytest.mark.parametrize("kind", DOCUMENT_FAULTS)
def test_items_refused_for_what_they_hold_are_rejected(
    es_server: ContractServer, factory: TraceFactory, kind: str
) -> None:
    store = es_store(es_server)
    es_server.faults.item_refusal = (400, kind)
    records = list(factory.traces(3))
    result = store.write_records(records)
    assert len(result.rejected) == len(encode_batch(records)) and result.stored == 0
    assert all(r.reason.startswith(f"Elasticsearch refused it (400): {kind}: scripted") for r in result.rejected)
    store.close()


def test_a_key_without_write_rights_is_an_outage_counted_and_ridden_out(
    es_server: ContractServer, factory: TraceFactory, tmp_path: Path
) -> None:
    """The audit's case: every item answered 403. Failed writes counted (/health), retried with backoff."""
    traces = list(factory.traces(20))
    es_server.faults.item_refusal = (403, "security_exception")
    pauses: list[float] = []

    def sleep(seconds: float) -> None:  # the pipeline's backoff; the key gets its rights after the third
        pauses.append(seconds)
        if len(pauses) == 3:
            es_server.faults.item_refusal = None

    em = TraceEmitter(es_store(es_server), SETTINGS, spool_dir=tmp_path / "spool",
                      quarantine=Quarantine(tmp_path / "q"), sleep=sleep).start()
    for t in traces:
        em.emit(t)
    assert em.flush(30)
    assert em.storage_state()["store_failed_writes"] == 3 and pauses == [0.05, 0.1, 0.2]
    registry = CollectorRegistry()
    registry.register(EmitterCollector(em))
    assert 'routelens_sink_failed_writes_total{sink="store"} 3.0' in generate_latest(registry).decode()
    em.close()
    assert set(es_server.engine.streams["routelens-traces"]) == {t.request_id for t in traces}
    assert em.stats.quarantined == 0 and "routelens-quarantine" not in es_server.engine.streams
    assert not list((tmp_path / "q").glob("*"))


def test_what_a_refusing_cluster_did_not_take_stays_in_the_spool_for_the_next_start(
    es_server: ContractServer, factory: TraceFactory, tmp_path: Path
) -> None:
    traces = list(factory.traces(12))
    es_server.faults.item_refusal = (404, "index_not_found_exception")
    first = TraceEmitter(es_store(es_server), SETTINGS, spool_dir=tmp_path / "spool",
                         quarantine=Quarantine(tmp_path / "q"), sleep=lambda s: None).start()
    for t in traces:
        first.emit(t)
    first.close(timeout_s=0.2)  # never came back
    assert first.stats.sinks["store"].failed >= 1 and first.stats.quarantined == 0
    assert "routelens-traces" not in es_server.engine.streams

    es_server.faults.item_refusal = None
    second = TraceEmitter(es_store(es_server), SETTINGS, spool_dir=tmp_path / "spool",
                          quarantine=Quarantine(tmp_path / "q"), sleep=lambda s: None).start()
    assert second.flush(30)
    second.close()
    assert set(es_server.engine.streams["routelens-traces"]) == {t.request_id for t in traces}
    assert second.stats.quarantined == 0 and not list((tmp_path / "q").glob("*"))
    assert second.stats.replayed >= len(traces) and second.stats.stored(Kind.QUARANTINE) == (0, 0)
