"""A verdict stored before its trace is given the trace's context once the trace is stored: reads stop paging it.

Every Elasticsearch read that counts feedback pages through the verdicts that have no trace context
and looks their traces up; they used to stay so for the whole retention, so that each read, over any
window, read every one of them (with 1,200 of them, a one-hour window read 1,200 verdicts in 7
searches instead of 3 searches reading none). The sink's upkeep (``idle``) now re-indexes them with
their trace's context: whoever stored the trace, the verdict's own writer if the trace was stored
meanwhile, or a sink starting on a store left so. The figures are the same either way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.synthetic import TraceFactory
from ingest.elasticsearch.late_context import LateContext, trace_context
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from schemas import DecisionTrace, Feedback
from schemas.config.storage import StorageSettings
from schemas.queries import TraceFilter
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer
from tests.polling import wait_until

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
FEEDBACK, TRACES = "routelens-feedback", "routelens-traces"


def _traces(n: int, days: int = 5) -> list[DecisionTrace]:
    f = TraceFactory(seed=8, n_candidates=2, start=T0 - timedelta(days=days), step=timedelta(days=days) / n)
    return [f.trace() for _ in range(n)]


def _verdicts(traces: list[DecisionTrace]) -> list[Feedback]:
    return [Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=5), correct=i % 3 != 0)
            for i, t in enumerate(traces)]


class Counted:
    """Searches and the hits they answered, from the contract server's engine."""

    def __init__(self, server: ContractServer) -> None:
        self.server, self.searches, self.hits = server, 0, 0
        search = server.engine.search

        def counting(stream: str, body: dict[str, Any], includes: list[str] | None) -> dict[str, Any]:
            out = search(stream, body, includes)
            self.searches += 1
            self.hits += len(out["hits"]["hits"])
            return out

        server.engine.search = counting  # type: ignore[method-assign]

    def cost(self, read: Any) -> tuple[Any, int, int, int]:
        """``read()``, and the searches, hits and requests of any kind it took."""
        searches, hits, requests = self.searches, self.hits, len(self.server.requests)
        out = read()
        return out, self.searches - searches, self.hits - hits, len(self.server.requests) - requests


@pytest.fixture
def server() -> Iterator[ContractServer]:
    with ContractServer() as s:
        yield s
    assert s.violations == []


def _store(server: ContractServer) -> ElasticsearchStore:
    return ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")


def _lacking(server: ContractServer) -> set[str]:
    return {i for i, doc in server.engine.streams.get(FEEDBACK, {}).items() if "trace" not in doc}


def test_reads_stop_paging_the_verdicts_stored_before_their_trace_once_the_sink_gave_them_context(
        server: ContractServer) -> None:
    traces = _traces(1200)
    verdicts = _verdicts(traces)
    store, counted = _store(server), Counted(server)
    for i in range(0, len(traces), 600):  # each verdict reaches the store before its trace
        store.write_records(verdicts[i:i + 600])
        store.write_records(traces[i:i + 600])
    assert len(_lacking(server)) == 1200
    flt = TraceFilter(start=T0 - timedelta(hours=1), end=T0)  # the last of five days: 10 traces
    inside = [i for i, t in enumerate(traces) if flt.start <= t.ts < T0]  # type: ignore[operator]
    want = (len(inside), len(inside), sum(1 for i in inside if i % 3 == 0))

    def read() -> tuple[Any, ...]:
        w = store.window_stats(flt)
        assert w is not None
        return w.requests, w.feedback, w.misroutes

    def misroutes() -> int:
        return len(store.misroutes(flt))

    before, searches, hits, _ = counted.cost(read)
    assert before == want and 2 <= want[0] < 20
    assert (searches, hits) == (2 + 2 * 2, 1200 + want[0])  # 2 pages of 1,000 verdicts, each with a trace lookup
    assert counted.cost(misroutes)[:3] == (want[2], 1 + 2, 400 + want[2])  # the 400 wrong ones: 1 page, 1 lookup

    _, _, _, upkeep = counted.cost(store.idle)
    assert _lacking(server) == set() and upkeep == 2 + 2 + 2 + 1  # the sweep: 2 pages, 2 lookups, 2 bulks; then
    fb = server.engine.streams[FEEDBACK]  # the verdicts on the traces stored since: 1 search (none left)
    assert all(fb[t.request_id]["trace"] == trace_context(server.engine.streams[TRACES][t.request_id])
               for t in traces)

    after, searches, hits, _ = counted.cost(read)
    assert after == before
    assert (searches, hits) == (3, 0)  # as if every verdict had come after its trace: no verdict read
    assert counted.cost(misroutes)[:3] == (want[2], 2, want[2])
    assert counted.cost(store.idle)[3] == 0  # nothing written since: no request
    store.close()


def test_the_writer_of_the_trace_gives_context_to_the_verdicts_another_worker_stored_first(
        server: ContractServer) -> None:
    traces = _traces(30, days=1)
    gateway_a, gateway_b = _store(server), _store(server)
    gateway_a.idle()
    gateway_b.idle()  # their sweeps, on an empty store
    gateway_a.write_records(_verdicts(traces[:10]))
    gateway_b.write_records(traces)
    assert len(_lacking(server)) == 10
    gateway_b.idle()
    assert _lacking(server) == set()
    gateway_a.idle()  # its own verdicts: their traces found, the verdicts have context already
    assert _lacking(server) == set()
    gateway_a.close()
    gateway_b.close()


def test_the_writer_of_a_verdict_gives_it_context_when_the_trace_was_stored_meanwhile(server: ContractServer) -> None:
    traces = _traces(30, days=1)
    gateway_a, gateway_b = _store(server), _store(server)
    gateway_a.idle()
    gateway_a.write_records(_verdicts(traces[:10]))  # the trace not stored yet
    gateway_b.write_records(traces)  # and its writer stops before its upkeep
    gateway_b.close()
    gateway_a.idle()
    assert _lacking(server) == set()
    gateway_a.close()


def test_a_starting_sink_sweeps_the_verdicts_an_earlier_one_left_without_context(server: ContractServer) -> None:
    traces = _traces(40, days=1)
    earlier = _store(server)
    earlier.write_records(_verdicts(traces))
    earlier.write_records(traces)
    earlier.close()  # an older version, or a process stopped before its upkeep
    later = _store(server)
    later.write_records([Feedback(request_id="never-traced", ts=T0, correct=False)])
    assert len(_lacking(server)) == 41
    later.idle()
    assert _lacking(server) == {"never-traced"}  # its trace is nowhere: left as it is, counted nowhere
    assert len(server.engine.streams[FEEDBACK]) == 41
    later.close()


def test_a_key_that_may_not_update_leaves_the_verdicts_as_they_were_and_says_so_once(
        server: ContractServer, caplog: pytest.LogCaptureFixture) -> None:
    traces = _traces(30, days=1)
    store = _store(server)
    flt = TraceFilter(start=T0 - timedelta(days=1), end=T0)
    with caplog.at_level(logging.WARNING, logger="ingest.elasticsearch.late_context"):
        for part in (traces[:15], traces[15:]):
            store.write_records(_verdicts(part))
            store.write_records(part)
            server.faults.item_refusal = (403, "security_exception")  # a key with create_doc but not index
            store.idle()  # does not raise: the pipeline goes on storing
            server.faults.item_refusal = None
    got = store.window_stats(flt)
    assert len(_lacking(server)) == 30 and got is not None and got.feedback == 30  # still counted, the slow way
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "403 security_exception" in warned[0] and "reads keep looking" in warned[0]
    store.close()


def test_a_verdict_changed_since_it_was_read_is_left_to_whoever_changed_it(server: ContractServer) -> None:
    traces = _traces(4, days=1)
    store = _store(server)
    store.write_records(_verdicts(traces))
    store.write_records(traces)
    late = LateContext(es_client(server.url), "routelens", "true")
    stale = late._search(Kind.FEEDBACK, None, size=10, seq_no_primary_term=True)
    contexts = late._contexts([t.request_id for t in traces])
    assert late._update(stale[:1], contexts) == 1  # another worker's upkeep, first
    assert late._update(stale, contexts) == 3  # the one changed since answers 409: not counted, not refused
    assert _lacking(server) == set() and not late._said_refused
    store.close()


def test_the_pipeline_gives_context_when_nothing_waits(server: ContractServer, tmp_path: Path) -> None:
    traces = _traces(20, days=1)
    store = _store(server)
    em = TraceEmitter(store, StorageSettings(batch_size=16, flush_interval_ms=5), spool_dir=tmp_path / "spool",
                      sleep=lambda s: None).start()
    try:
        for record in _verdicts(traces):
            em.emit(record)
        assert em.flush()
        assert len(_lacking(server)) == 20
        for record in traces:
            em.emit(record)
        assert em.flush()
        assert wait_until(lambda: not _lacking(server), 30, every=0.02)
    finally:
        em.close()


def test_the_stand_in_updates_a_data_stream_document_only_as_elasticsearch_does(server: ContractServer) -> None:
    store = _store(server)
    store.write_records(_verdicts(_traces(1, days=1)))
    (rid, doc), = server.engine.streams[FEEDBACK].items()
    client = es_client(server.url)
    for meta, status in [({"_index": FEEDBACK}, 400),  # the data stream takes create only
                         ({"_index": f".ds-{FEEDBACK}-000001"}, 400),  # a backing index: at a sequence number
                         ({"_index": f".ds-{FEEDBACK}-000001", "if_seq_no": 7, "if_primary_term": 1}, 409),
                         ({"_index": f".ds-{FEEDBACK}-000001", "if_seq_no": 0, "if_primary_term": 1}, 200)]:
        [item] = client.bulk(operations=[{"index": {**meta, "_id": rid}}, {**doc, "source": "changed"}])["items"]
        assert item["index"]["status"] == status, meta
    assert server.engine.streams[FEEDBACK][rid]["source"] == "changed"
    store.close()
