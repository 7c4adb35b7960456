"""The relay is confirmed only once the records are on the store's disk (the audit's lost 388 traces).

A store whose spool took no record (its disk full) held relayed records in memory and answered
200; the gateway then forgot its own copy, and ``kill -9`` of the store lost them for good. Now
such a store answers 503 ``spool_unavailable`` and keeps nothing; the gateway retries with
backoff, keeping the records in its own spool, and delivers them once the store's spool works.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.synthetic import TraceFactory
from ingest.http_api.relay import RELAY_PATH, RelaySink
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from tests.e2e.net import call
from tests.ingest.http_api.test_relay import SETTINGS, StoreServer
from tests.polling import wait_until


def broken_store(tmp_path: Path) -> StoreServer:
    """A store whose spool folder cannot be made (a file stands where it goes): even root cannot write it."""
    (tmp_path / "store.spool").write_text("in the way")
    return StoreServer(tmp_path)


def test_a_store_whose_spool_takes_nothing_refuses_the_relay_and_keeps_nothing(tmp_path: Path) -> None:
    server = broken_store(tmp_path)
    try:
        body = b'%d\t{"request_id": "r1"}\n%d\t{"request_id": "r2"}\n' % (Kind.TRACE, Kind.TRACE)
        status, answer = call("POST", f"http://127.0.0.1:{server.port}{RELAY_PATH}", body)
        assert status == 503 and answer["error"]["code"] == "spool_unavailable", answer
        assert "store.spool" in answer["error"]["message"] and "none was kept" in answer["error"]["message"]
        assert len(server.emitter.backlog.memory) == 0 and server.emitter.stats.queued == 0
    finally:
        server.close()


def test_a_gateway_keeps_what_the_store_refused_and_delivers_it_once_the_spool_works(tmp_path: Path) -> None:
    server = broken_store(tmp_path)
    pauses: list[float] = []

    def pause(delay: float) -> None:  # the batcher's backoff, recorded, and shortened
        pauses.append(delay)
        time.sleep(min(delay, 0.2))

    gateway = TraceEmitter(RelaySink(f"http://127.0.0.1:{server.port}"), SETTINGS, spool_dir=tmp_path / "gw.spool",
                           quarantine=Quarantine(tmp_path / "gw.q"), sleep=pause).start()
    try:
        traces = list(TraceFactory(seed=11, n_candidates=3).traces(10))
        for trace in traces:
            gateway.emit(trace)
        assert wait_until(lambda: len(pauses) >= 3, 20, every=0.01)
        assert pauses[:3] == [0.05, 0.1, 0.2]  # retried with backoff, not given up
        # all of it still in the gateway's own spool (none delivered), none in the store's memory
        queued = gateway.stats.queued
        assert gateway.backlog.pending() + gateway.batcher.in_hand == queued and queued >= 10
        assert gateway.stats.sinks["store"].delivered == 0 and gateway.stats.spooled == queued
        assert len(server.emitter.backlog.memory) == 0 and server.store.count(Kind.TRACE) == 0
        (tmp_path / "store.spool").unlink()  # the store's spool can be made now (it retries it every 5 s)
        assert gateway.flush(60), gateway.storage_state()
        assert server.emitter.flush(30)
        assert server.store.count(Kind.TRACE) == 10
        assert all(server.store.get(t.request_id) is not None for t in traces)
        assert server.emitter.stats.spooled == server.emitter.stats.queued  # taken only into its spool
    finally:
        gateway.close()
        server.close()
