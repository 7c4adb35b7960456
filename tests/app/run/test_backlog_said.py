"""A process that starts with records in its spool (a crash, a store that was down) says so.

Found by an upgrade audit: a folder's spooled traces were delivered at the next start without a word.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from app.run.gateway_app import build_gateway_app
from app.run.store import build_store_app
from bench.synthetic import TraceFactory
from ingest.pipeline.emitter import TraceEmitter
from tests.app.run.test_storage_health import config
from tests.ingest.pipeline.test_emitter import FlakySink


def _left(spool: Path, n: int) -> int:
    """``n`` traces in ``spool`` that their sink never took (it was down until the process ended): its records."""
    emitter = TraceEmitter(FlakySink(down=True), spool_dir=spool, sleep=lambda _: time.sleep(0.01)).start()
    for trace in TraceFactory(seed=9).traces(n):
        emitter.emit(trace)
    held = emitter.backlog_size()
    emitter.close(timeout_s=0.5)  # its sink stays down: nothing to wait for
    return held


@pytest.mark.parametrize("process", ["store", "gateway"])
def test_a_start_with_a_spool_left_says_how_many_records_go_first(tmp_path: Path, process: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    before = set(threading.enumerate())
    cfg = config(tmp_path, tmp_path / "spool")
    spool = tmp_path / ("spool" if process == "store" else "spool.gateway-0")  # a worker spools beside the store
    held = _left(spool, 3)  # the traces and the snapshots they name
    assert held >= 3
    if process == "store":
        app = build_store_app(cfg, str(tmp_path / "t.duckdb"))
    else:
        app = build_gateway_app(cfg, str(tmp_path / "t.duckdb"), store_url="http://127.0.0.1:9")
    said = capsys.readouterr().out
    asyncio.run(started_and_stopped(app))  # its pipeline closed: no thread left retrying the store meanwhile
    assert f"{spool}: {held} records from before this start, delivered first" in said
    assert [t.name for t in threading.enumerate() if t not in before] == []  # was the batcher, retrying :9


def test_an_empty_spool_says_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = build_store_app(config(tmp_path, tmp_path / "spool"), str(tmp_path / "t.duckdb"))
    asyncio.run(started_and_stopped(app))
    assert "records from before this start" not in capsys.readouterr().out


async def started_and_stopped(app: web.Application) -> None:
    """Run ``app``'s start and its cleanup, as serving it would (its pipeline's threads end)."""
    async with TestServer(app):
        pass
