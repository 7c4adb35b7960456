"""``GET /v1/feedback?settle=false`` counts the verdicts the store has received and not written yet.

The gateway asks it about every verdict it takes, once its claims (which start again with it) know
none: a verdict relayed a moment before a gateway restart, or left in the store's spool by a crash
and replayed, waits up to ``storage.store_flush_interval_ms`` before it is written, and the answer
"none" let a second verdict through (202, then quarantined by the store). The store process's
application (``routelens store``), served on 127.0.0.1, its writes an hour apart unless a read
settles them.
"""

from __future__ import annotations

import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from app.run.procs import free_port
from app.run.store import build_store_app
from bench.synthetic import TraceFactory
from ingest import DuckDBTraceStore, HttpTraceStore, IngestApi, TraceEmitter
from ingest.codec.encoder import Encoder
from ingest.http_api.relay import RELAY_PATH
from ingest.pipeline import pending_verdicts
from schemas.config import RouteLensConfig
from schemas.config.storage import StorageSettings
from schemas.feedback import Feedback
from tests.ingest.pipeline.test_pending_verdicts import leave_in_spool
from tests.serve_thread import in_thread

NOW = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def no_relay_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROUTELENS_RELAY_TOKEN", raising=False)


def config(tmp_path: Path) -> RouteLensConfig:
    return RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{free_port()}"}]},
        "probes": {"enabled": False},
        "storage": {"duckdb_path": str(tmp_path / "t.duckdb"), "spool": {"dir": str(tmp_path / "spool")},
                    "quarantine_dir": str(tmp_path / "quarantine"), "store_flush_interval_ms": 3_600_000},
    })


def relay(url: str, *records: Any) -> None:
    """Hand records over as a gateway's relay does (they are in the store's spool when it answers)."""
    enc = Encoder()
    body = b"".join(b"%d\t%s\n" % (kind, payload) for record in records for kind, payload in enc.encode(record))
    req = urllib.request.Request(url + RELAY_PATH, data=body, headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def backlog(url: str) -> int:
    """Records the store holds and has not written (its ``/health``)."""
    with urllib.request.urlopen(url + "/health", timeout=10) as resp:
        return int(orjson.loads(resp.read())["backlog"])


def verdict(request_id: str, correct: bool) -> Feedback:
    return Feedback(request_id=request_id, ts=NOW, correct=correct, source="grader")


def test_a_relayed_verdict_not_written_yet_is_answered_without_a_write(tmp_path: Path) -> None:
    trace = TraceFactory(seed=2, n_candidates=2).trace(request_id="judged")
    with in_thread(build_store_app(config(tmp_path), str(tmp_path / "t.duckdb"))) as url:
        client = HttpTraceStore(url)
        relay(url, trace, verdict("judged", False))
        waiting = backlog(url)
        assert waiting >= 2  # nothing written: the store writes once an hour
        (got,) = client.feedback("judged", settle=False)  # was []: the window a second verdict went through
        assert (got.request_id, got.correct, got.source) == ("judged", False, "grader")
        assert backlog(url) == waiting  # the check wrote nothing
        assert client.feedback("other", settle=False) == []
        assert client.feedback("judged") == [got]  # a settled read writes what waits first
        assert backlog(url) == 0
        assert client.feedback("judged", settle=False) == [got]  # written: the store answers


def test_a_store_started_over_a_spool_holding_a_verdict_answers_it_before_replaying_it(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    DuckDBTraceStore(tmp_path / "t.duckdb").close()  # the file the first store wrote
    leave_in_spool(tmp_path / "spool", [verdict("judged", True)])  # relayed, then the store was killed
    with in_thread(build_store_app(cfg, str(tmp_path / "t.duckdb"))) as url:
        client = HttpTraceStore(url)
        assert backlog(url) == 1  # replayed at the next write, an hour away
        assert [(v.request_id, v.correct) for v in client.feedback("judged", settle=False)] == [("judged", True)]
        assert backlog(url) == 1
        assert client.feedback("other", settle=False) == []
    # (its close writes what waits)
    store = DuckDBTraceStore(tmp_path / "t.duckdb", read_only=True)
    try:
        assert [v.correct for v in store.feedback("judged")] == [True]
    finally:
        store.close()


def test_when_the_pipeline_cannot_tell_the_check_writes_what_waits_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pending_verdicts, "PENDING_VERDICTS", 2)  # more than that wait: the oldest forgotten
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    emitter = TraceEmitter(store, StorageSettings(flush_interval_ms=3_600_000), spool_dir=tmp_path / "spool").start()
    app = web.Application()
    IngestApi(emitter, store).add_routes(app)
    try:
        with in_thread(app) as url:
            client = HttpTraceStore(url)
            for rid in ("r1", "r2", "r3"):
                emitter.emit(verdict(rid, False))
            assert emitter.pending_verdicts("r1") is None  # forgotten while it waits
            assert emitter.backlog_size() == 3
            assert [v.request_id for v in client.feedback("r3", settle=False)] == ["r3"]  # held: no write
            assert emitter.backlog_size() == 3
            assert [v.request_id for v in client.feedback("r1", settle=False)] == ["r1"]  # written first
            assert emitter.backlog_size() == 0
            assert client.feedback("r9", settle=False) == []  # nothing forgotten waits now: no write needed
    finally:
        emitter.close()
        store.close()
