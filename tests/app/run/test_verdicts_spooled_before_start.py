"""A verdict given before a gateway restart and still in its spool makes a second one a 409 at once.

The gateway's claims start again with it; the verdict it took before the restart may not have
reached the store yet (its spool replays it to the store, which writes it later). The gateway
``routelens serve`` builds (``build_gateway_app``), started over a spool holding that verdict, its
writes an hour apart: a second verdict on the request is refused before anything is written, through
this gateway and, with the claims in a shared Redis, through another worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.run.gateway_app import GATEWAY, StoreHooks, build_gateway_app
from app.run.procs import free_port
from app.run.store import build_store_app
from bench.synthetic import TraceFactory
from ingest import DuckDBTraceStore
from schemas.config import RouteLensConfig
from schemas.feedback import Feedback
from tests.app.run.test_storage_health import elsewhere
from tests.ingest.pipeline.test_pending_verdicts import leave_in_spool
from tests.redis_server import RedisServer, redis_server, requires_redis

__all__ = ["redis_server"]  # the fixture, used below

NOW = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
EVER = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
Client = TestClient[Any, Any]


@pytest.fixture(autouse=True)
def no_relay_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROUTELENS_RELAY_TOKEN", raising=False)


def config(tmp_path: Path, **more: object) -> RouteLensConfig:
    return RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{free_port()}"}]},
        "scrape": {"interval_s": 60},
        "probes": {"enabled": False},
        "storage": {"duckdb_path": str(tmp_path / "t.duckdb"), "spool": {"dir": str(tmp_path / "spool")},
                    "quarantine_dir": str(tmp_path / "quarantine"),
                    "flush_interval_ms": 3_600_000, "store_flush_interval_ms": 3_600_000},
        **more,
    })


def traced(db: Path, *request_ids: str) -> None:
    """Requests whose traces the store wrote before the restart."""
    store = DuckDBTraceStore(db)
    try:
        factory = TraceFactory(seed=6, n_candidates=2)
        store.write_records([factory.trace(request_id=rid) for rid in request_ids])
    finally:
        store.close()


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[Client]:
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def judge(client: Client, request_id: str) -> tuple[int, dict[str, Any]]:
    resp = await client.post("/v1/feedback", json={"request_id": request_id, "correct": False})
    return resp.status, orjson.loads(await resp.read())


def test_a_gateway_started_over_its_spool_refuses_a_second_verdict_before_anything_is_written(
        tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    traced(db, "judged")
    leave_in_spool(tmp_path / "spool", [Feedback(request_id="judged", ts=NOW, correct=True)])

    async def main() -> None:
        app = build_gateway_app(config(tmp_path), str(db))  # the store in this process
        hooks = app[GATEWAY].hooks
        assert isinstance(hooks, StoreHooks)
        async with serving(app) as client:
            status, body = await judge(client, "judged")
            assert status == 409, body  # was 202: accepted, learned, then quarantined by the store
            assert (body["error"]["code"], body["error"]["param"]) == ("feedback_exists", "request_id")
            assert hooks.store.feedback("judged") == []  # nothing written: the first verdict still waits
            assert hooks.emitter.backlog_size() >= 1  # (with what the gateway emitted since: events)
            assert (await judge(client, "judged"))[0] == 409

    asyncio.run(main())
    store = DuckDBTraceStore(db, read_only=True)  # the gateway's close wrote what waited
    try:
        assert [(v.request_id, v.correct) for v in store.feedback("judged")] == [("judged", True)]
        assert store.quarantined(*EVER) == []
    finally:
        store.close()


@requires_redis
def test_the_claims_of_a_spooled_verdict_are_in_redis_for_every_worker(tmp_path: Path,
                                                                       redis_server: RedisServer) -> None:
    db = tmp_path / "t.duckdb"
    traced(db, "judged", "fresh")
    leave_in_spool(tmp_path / "spool.gateway-0", [Feedback(request_id="judged", ts=NOW, correct=True)])
    cfg = config(tmp_path, shared={"backend": "redis", "url": redis_server.url, "timeout_ms": 1000})

    async def main(store_url: str) -> None:
        first = build_gateway_app(cfg, str(db), store_url=store_url, worker=0, workers=2)
        other = build_gateway_app(cfg, str(db), store_url=store_url, worker=1, workers=2)
        async with serving(first) as worker_0, serving(other) as worker_1:
            status, body = await judge(worker_1, "judged")  # worker 1's spool and the store know nothing of it
            assert status == 409, body
            assert body["error"]["code"] == "feedback_exists"
            assert (await judge(worker_0, "judged"))[0] == 409
            status, body = await judge(worker_1, "fresh")  # a request without a verdict still takes one
            assert status == 202, body
            assert (await judge(worker_0, "fresh"))[0] == 409

    with elsewhere(build_store_app(cfg, str(db))) as url:
        asyncio.run(main(url))
