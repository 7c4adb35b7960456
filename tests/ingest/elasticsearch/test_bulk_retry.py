"""A bulk write retried after a partial failure sends only what was not settled, and counts each item once.

Against the contract server. A batch of which some items were answered 429 (after the client's
own retries) or 5xx is retried by the pipeline; the retry sent the whole batch again, so every
item the first attempt stored came back 409 and was counted a duplicate (``written`` too low,
``duplicates`` too high), and a refused item was refused again. Now the retry carries the items not
settled only, and the batch's result is every attempt's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.synthetic import TraceFactory
from ingest.codec.encoder import encode_batch
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.errors import SinkUnavailable
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from schemas.config.storage import StorageSettings
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer
from tests.ingest.plain_values import plain_of


class Recording(ContractServer):
    """The contract server, keeping the ``_id`` of every item of every bulk request."""

    def __init__(self) -> None:
        super().__init__()
        self.bulks: list[list[str]] = []

    def _bulk(self, body: bytes, default_index: str | None) -> dict[str, Any]:
        actions = [json.loads(ln) for ln in body.split(b"\n") if ln.strip()][0::2]
        self.bulks.append([str(next(iter(a.values()))["_id"]) for a in actions])
        return super()._bulk(body, default_index)


@pytest.fixture
def server() -> Iterator[Recording]:
    rec = Recording()
    with rec:
        yield rec
    assert rec.violations == [], "requests or answers outside the contract"


def es_store(server: ContractServer) -> ElasticsearchStore:
    # no retries of 429 items inside the sink: the items answered 429 stay unstored, as after spent retries
    return ElasticsearchStore(es_client(server.url), max_retries=0, initial_backoff_s=0.01, refresh="true")


def test_the_retry_of_a_partly_stored_batch_sends_only_the_items_not_stored(server: Recording,
                                                                            factory: TraceFactory) -> None:
    store = es_store(server)
    traces = list(factory.traces(6))
    refused = traces[-1].request_id
    server.faults.item_429, server.faults.refuse_ids = 3, {refused}
    prepared = store.prepare(encode_batch(traces))
    n = sum(len(docs) for docs in prepared.tables.values())  # the traces and their scrape round's snapshots
    with pytest.raises(SinkUnavailable, match=r"did not store 3 items.*3 x 429"):
        store.write(prepared)
    (first,) = server.bulks
    assert len(first) == n and refused in first
    result = store.write(prepared)  # the pipeline's retry: the same prepared batch
    assert server.bulks[1] == first[:3]  # the three answered 429, nothing stored or refused before
    assert result.duplicates == 0 and result.stored == n - 1
    assert [r.payload for r in result.rejected] == [p for p in prepared.batch.payloads[Kind.TRACE]
                                                   if json.loads(p)["request_id"] == refused]  # refused once
    assert set(server.engine.streams["routelens-traces"]) == {t.request_id for t in traces} - {refused}
    store.close()


def test_a_new_batch_after_a_retried_one_is_sent_whole(server: Recording, factory: TraceFactory) -> None:
    store = es_store(server)
    traces = list(factory.traces(4))
    server.faults.item_429 = 2
    prepared = store.prepare(encode_batch(traces[:2]))
    with pytest.raises(SinkUnavailable):
        store.write(prepared)
    store.write(prepared)
    later = store.prepare(encode_batch(traces[2:]))
    result = store.write(later)  # its snapshots are the scrape round's already stored: duplicates
    assert len(server.bulks[-1]) == sum(len(d) for d in later.tables.values()) == result.stored + result.duplicates
    assert result.by_kind[Kind.TRACE] == [2, 0]
    store.close()


def test_the_pipeline_counts_each_record_once_across_the_retries(server: Recording, factory: TraceFactory,
                                                                 tmp_path: Path) -> None:
    traces = list(factory.traces(20))
    server.faults.item_429, server.faults.refuse_ids = 5, {traces[11].request_id}
    em = TraceEmitter(es_store(server), StorageSettings(batch_size=64, flush_interval_ms=5),
                      spool_dir=tmp_path / "spool", quarantine=Quarantine(tmp_path / "q"), sleep=lambda s: None)
    for t in traces:
        em.emit(t)
    em.start()  # one batch: the whole backlog
    assert em.flush(30)
    em.close()
    stats = em.stats
    assert stats.sinks["store"].failed == 1 and stats.duplicates == 0
    assert stats.quarantined == 1 and stats.by_kind[Kind.TRACE] == [19, 0]
    assert stats.queued == stats.written + stats.duplicates + stats.quarantined + stats.dropped
    assert set(server.engine.streams["routelens-traces"]) == {t.request_id for t in traces} - {traces[11].request_id}
    (q,) = server.engine.streams["routelens-quarantine"].values()
    assert q["request_id"] == traces[11].request_id


def test_an_unchecked_trace_that_does_not_hold_is_quarantined_not_lost(server: Recording, factory: TraceFactory,
                                                                       tmp_path: Path) -> None:
    """The gateway's traces reach the store unvalidated; the sink's preparation refuses one that does not hold.

    The Elasticsearch sink dropped those refusals: the trace was neither stored nor quarantined.
    """
    traces = list(factory.traces(5))
    em = TraceEmitter(es_store(server), StorageSettings(batch_size=16, flush_interval_ms=5),
                      spool_dir=tmp_path / "spool", quarantine=Quarantine(tmp_path / "q"),
                      sleep=lambda s: None).start()
    for t in traces:
        assert em.emit_plain(plain_of(t))
    assert em.emit_plain(plain_of(traces[0]) | {"request_id": "r-invalid", "intent_confidence": 1.5})
    assert em.flush(30)
    em.close()
    assert set(server.engine.streams["routelens-traces"]) == {t.request_id for t in traces}
    assert em.stats.quarantined == 1 and em.stats.sinks["store"].rejected == 1
    (q,) = server.engine.streams["routelens-quarantine"].values()
    assert q["request_id"] == "r-invalid"
