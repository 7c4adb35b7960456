"""The relay: a gateway's pipeline hands its encoded records to a store process over loopback HTTP."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from app.run.procs import free_port
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.errors import SinkUnavailable
from ingest.http_api.relay import RelaySink, add_relay_route, parse_relayed
from ingest.http_api.routes import IngestApi
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.metrics import EmitterCollector
from ingest.pipeline.quarantine import Quarantine
from ingest.record_sink import RecordBatch
from schemas.config.storage import StorageSettings
from tests.e2e.net import call
from tests.ingest.plain_values import plain_of

SETTINGS = StorageSettings(batch_size=64, flush_interval_ms=5)


class StoreServer:
    """The store's side: an emitter into DuckDB behind the relay route, on 127.0.0.1 in a thread."""

    def __init__(self, tmp: Path, settings: StorageSettings = SETTINGS) -> None:
        self.store = DuckDBTraceStore(tmp / "store.duckdb")
        self.emitter = TraceEmitter(self.store, settings, spool_dir=tmp / "store.spool",
                                    quarantine=Quarantine(tmp / "store.q")).start()
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        add_relay_route(app, self.emitter)
        IngestApi(self.emitter, self.store).add_routes(app)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        self._loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self.emitter.close()


def registry_of(emitter: TraceEmitter) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(EmitterCollector(emitter))
    return registry


@pytest.fixture
def store_server(tmp_path: Path) -> Iterator[StoreServer]:
    server = StoreServer(tmp_path)
    yield server
    server.close()


def test_a_gateway_pipeline_relays_everything_into_the_store(tmp_path: Path, store_server: StoreServer) -> None:
    gateway = TraceEmitter(RelaySink(f"http://127.0.0.1:{store_server.port}"), SETTINGS,
                           spool_dir=tmp_path / "gw.spool", quarantine=Quarantine(tmp_path / "gw.q")).start()
    traces = list(TraceFactory(seed=3, n_candidates=4, round_every=5).traces(40))
    for trace in traces:
        gateway.emit(trace)
    assert gateway.flush(30)
    gateway.close()
    assert store_server.emitter.flush(30)  # the store answered once they were in its spool; now written
    assert store_server.store.count(Kind.TRACE) == 40  # each readable, candidate states joined back
    back = store_server.store.get(traces[7].request_id)
    assert back is not None and back.model_dump() == traces[7].model_dump()


def test_the_relay_answers_once_spooled_and_a_lookup_writes_what_waits(tmp_path: Path) -> None:
    # a store that would write only once a minute: the gateway's flush returns all the same, and
    # a lookup by id finds a relayed trace at once (the store writes what waits, then looks)
    server = StoreServer(tmp_path, StorageSettings(batch_size=64, flush_interval_ms=60_000))
    try:
        gateway = TraceEmitter(RelaySink(f"http://127.0.0.1:{server.port}"), SETTINGS,
                               spool_dir=tmp_path / "gw.spool", quarantine=Quarantine(tmp_path / "gw.q")).start()
        traces = list(TraceFactory(seed=5, n_candidates=3).traces(12))
        for trace in traces:
            gateway.emit_plain(plain_of(trace))
        assert gateway.flush(20)
        gateway.close()
        # spooled (with their snapshots), not written
        assert server.store.count(Kind.TRACE) == 0 and server.emitter.backlog_size() >= 12
        found = call("GET", f"http://127.0.0.1:{server.port}/v1/traces/{traces[4].request_id}")
        missing = call("GET", f"http://127.0.0.1:{server.port}/v1/traces/no-such-id")
        assert found == (200, traces[4].model_dump(mode="json"))
        assert server.store.count(Kind.TRACE) == 12 and missing[0] == 404
    finally:
        server.close()


def test_a_workers_unvalidated_traces_are_validated_by_the_store(tmp_path: Path, store_server: StoreServer) -> None:
    gateway = TraceEmitter(RelaySink(f"http://127.0.0.1:{store_server.port}"), SETTINGS,
                           spool_dir=tmp_path / "gw.spool", quarantine=Quarantine(tmp_path / "gw.q")).start()
    traces = list(TraceFactory(seed=8, n_candidates=3).traces(10))
    for trace in traces:
        gateway.emit_plain(plain_of(trace))
    gateway.emit_plain(plain_of(traces[0]) | {"request_id": "r-bad", "latency_ms": -2.0})
    assert gateway.flush(30)
    gateway.close()
    assert store_server.emitter.flush(30)
    assert store_server.store.count(Kind.TRACE) == 10 and store_server.store.get("r-bad") is None
    assert store_server.emitter.stats.quarantined == 1 and gateway.stats.quarantined == 0  # judged by the store
    # relayed, they count as traces in the worker's own /metrics (the unchecked kind has no table: a 500 before)
    text = generate_latest(registry_of(gateway)).decode()
    assert 'routelens_records_written_total{kind="trace"} 11.0' in text
    back = store_server.store.get(traces[3].request_id)
    assert back is not None and back.model_dump() == traces[3].model_dump()


def test_a_store_that_is_down_is_a_retryable_sink_error(tmp_path: Path) -> None:
    sink = RelaySink(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    batch = sink.prepare(RecordBatch({Kind.TRACE: [b'{"request_id": "x"}']}))
    with pytest.raises(SinkUnavailable, match="unreachable"):
        sink.write(batch)


@pytest.mark.parametrize("body", [b"1\tnot json\n", b"99\t{}\n", b"no tab\n", b"trace\t{}\n"])
def test_a_malformed_relay_line_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError, match="line 1"):
        parse_relayed(body)


def test_relay_lines_keep_kind_and_payload() -> None:
    body = b'%d\t{"a": 1}\n%d\t{"b": "x\\ty"}\n' % (Kind.TRACE, Kind.SNAPSHOT)
    assert parse_relayed(body) == [(Kind.TRACE, b'{"a": 1}'), (Kind.SNAPSHOT, b'{"b": "x\\ty"}')]
