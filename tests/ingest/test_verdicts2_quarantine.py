"""A later verdict in the quarantine: filed under its request's id, with the one reason every store gives.

The pipeline filed a refused record under its kind's own id field, so a verdict's quarantine record
said ``request_id: <feedback_id>``: looking a request up in the quarantine (``GET /v1/quarantine``,
the day files) missed its refused verdicts. Both stores word the refusal with
:func:`ingest.record_sink.verdict_reason`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from ingest.record_sink import verdict_reason
from schemas.config.storage import StorageSettings
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer
from tests.ingest.test_numbers2_verdicts import T0, _traces, _verdict

NOW = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["duckdb", "elasticsearch"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "duckdb":
        yield DuckDBTraceStore(tmp_path / "t.duckdb", clock=lambda: NOW)  # the emitter closes it
        return
    with ContractServer() as server:
        yield ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")
    assert server.violations == []


def test_a_later_verdict_is_quarantined_under_its_request_id(store: Any, tmp_path: Path) -> None:
    traces = _traces()[:4]
    folder = tmp_path / "quarantine"
    em = TraceEmitter(store, StorageSettings(batch_size=16, flush_interval_ms=5), spool_dir=tmp_path / "spool",
                      quarantine=Quarantine(folder, lambda: NOW), sleep=lambda s: None).start()
    try:
        for record in [*traces, _verdict(traces[0], 5, True)]:
            em.emit(record)
        assert em.flush()
        em.emit(_verdict(traces[0], 60, False))  # as after a gateway restart
        assert em.flush() and em.flush()  # the verdict refused, then its quarantine record stored
        held = [q for q in store.quarantined(T0 - timedelta(days=1), NOW + timedelta(days=1)) if q.kind == "feedback"]
        assert [f.correct for f in store.feedback(traces[0].request_id)] == [True]
    finally:
        em.close()  # closes the store too
    assert [(q.request_id, q.reason) for q in held] == [(traces[0].request_id, verdict_reason(traces[0].request_id))]
    [line] = (folder / "quarantine-2026-11-01.jsonl").read_bytes().splitlines()
    filed = orjson.loads(line)
    assert filed["request_id"] == traces[0].request_id and '"correct":false' in filed["raw"]


def test_a_record_without_a_request_is_still_filed_under_its_own_id(tmp_path: Path) -> None:
    db = DuckDBTraceStore(tmp_path / "t.duckdb", clock=lambda: NOW)
    em = TraceEmitter(db, StorageSettings(batch_size=16, flush_interval_ms=5), spool_dir=tmp_path / "spool",
                      clock=lambda: NOW, sleep=lambda s: None).start()
    try:
        probe = b'{"probe_id": "p-1", "ts": "2026-11-01T08:00:00Z"}'
        assert em.reject(Kind.PROBE, probe, "bad", source="test").request_id == "p-1"
        assert em.flush()
    finally:
        em.close()
    assert [q.request_id for q in db.quarantined(T0, NOW + timedelta(days=1))] == ["p-1"]
    db.close()


def test_both_sinks_word_a_later_verdict_with_the_shared_reason(tmp_path: Path) -> None:
    traces = _traces()[:2]
    db = DuckDBTraceStore(tmp_path / "t.duckdb", clock=lambda: NOW)
    db.write_records([*traces, _verdict(traces[1], 5, True)])
    got = [r.reason for r in db.write_records([_verdict(traces[1], 9, False)]).rejected]
    db.close()
    with ContractServer() as server:
        es = ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")
        es.write_records([*traces, _verdict(traces[1], 5, True)])
        got += [r.reason for r in es.write_records([_verdict(traces[1], 9, False)]).rejected]
        es.close()
    assert got == [verdict_reason(traces[1].request_id)] * 2
