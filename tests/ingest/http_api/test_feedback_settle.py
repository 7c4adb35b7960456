"""``GET /v1/feedback?settle=false`` reads what the store has written and forces no write.

The gateway asks the store about every verdict it takes (a second one after a restart is a 409:
``StoreHooks.has_stored_verdict``). The route's read-your-writes wrote the store's whole pending
batch first whenever the verdict was not stored yet, which it never is for a new one: under steady
feedback the store wrote once a verdict instead of every ``storage.store_flush_interval_ms``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
from aiohttp import web

from ingest import DuckDBTraceStore, HttpTraceStore, IngestApi, TraceEmitter
from schemas.config.storage import StorageSettings
from schemas.feedback import Feedback
from tests.serve_thread import in_thread

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _written(path: Path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return int(con.execute("SELECT count(*) FROM feedback").fetchall()[0][0])
    finally:
        con.close()


def test_a_check_reads_what_is_written_and_a_client_read_writes_what_waits(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    store = DuckDBTraceStore(path)
    # a pipeline that would write only in an hour, or when flushed
    emitter = TraceEmitter(store, StorageSettings(flush_interval_ms=3_600_000, batch_size=10_000),
                           spool_dir=tmp_path / "spool").start()
    app = web.Application()
    IngestApi(emitter, store).add_routes(app)
    try:
        with in_thread(app) as url:
            client = HttpTraceStore(url)
            emitter.emit(Feedback(request_id="r1", ts=NOW, correct=False))
            (waiting,) = client.feedback("r1", settle=False)  # waiting: answered from the pipeline
            assert (waiting.request_id, waiting.correct) == ("r1", False)
            assert emitter.backlog_size() == 1  # still waiting: no write was made for the check
            (got,) = client.feedback("r1")  # a client's read: what waits is written first
            assert (got.request_id, got.correct) == ("r1", False)
            assert emitter.backlog_size() == 0
            assert client.feedback("r1", settle=False) == [got]  # written: found either way
    finally:
        emitter.close()
        store.close()
    assert _written(path) == 1
