"""``/health`` of the store process and of a gateway turns 503 for storage problems (found by an audit).

The audit: with the store's spool on a full disk its relay confirmed records it held in memory
only, its ``/health`` said ok all along, and a gateway's ``/health`` stayed ok with the store
dead or its writes failing. Here the store and the gateway are the applications ``routelens
store`` and ``routelens serve`` build, on 127.0.0.1; a spool that cannot be written is one whose
folder has a file in its way (root can write anything else).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.run.gateway_app import StoreHooks, build_gateway_app
from app.run.procs import free_port
from app.run.store import build_store_app
from bench.synthetic import TraceFactory
from ingest.http_api.client import HttpTraceStore
from ingest.http_api.relay import RELAY_PATH
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas.config import RouteLensConfig
from tests.ingest.pipeline.test_emitter import FlakySink
from tests.polling import wait_until_async

RELAY = "ROUTELENS_RELAY_TOKEN"


@pytest.fixture(autouse=True)
def no_relay_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RELAY, raising=False)


def config(tmp_path: Path, spool: Path) -> RouteLensConfig:
    return RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{free_port()}"}]},
        "scrape": {"interval_s": 60},
        "probes": {"enabled": False},
        "storage": {"spool": {"dir": str(spool)}, "quarantine_dir": str(tmp_path / "quarantine"),
                    "flush_interval_ms": 20},
    })


def blocked(tmp_path: Path) -> Path:
    """A spool folder that cannot be made: a file stands where it goes."""
    (tmp_path / "in-the-way").write_text("a file")
    return tmp_path / "in-the-way" / "spool"


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


@contextmanager
def elsewhere(app: web.Application) -> Iterator[str]:
    """Serve ``app`` on a loop of its own (as the store process would be): the gateway's cleanup blocks its loop."""
    loop, port = asyncio.new_event_loop(), free_port()
    runner = web.AppRunner(app)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(runner.setup(), loop).result(10)
    asyncio.run_coroutine_threadsafe(web.TCPSite(runner, "127.0.0.1", port).start(), loop).result(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def get(client: TestClient[Any, Any], path: str) -> tuple[int, Any]:
    resp = await client.get(path)
    return resp.status, orjson.loads(await resp.read())


async def _the_store_is_503_while_its_spool_takes_nothing_and_refuses_the_relay(tmp_path: Path) -> None:
    async with serving(build_store_app(config(tmp_path, blocked(tmp_path)), str(tmp_path / "t.duckdb"))) as store:
        status, body = await get(store, "/health")
        assert status == 503 and body["status"] == "degraded", body
        assert body["reason"].startswith("trace spool unavailable (") and "in-the-way" in body["reason"]
        assert body["storage"]["spool"] == "unavailable: records held in memory"
        relayed = await store.post(RELAY_PATH, data=b'%d\t{"request_id": "r1"}\n' % Kind.TRACE)
        assert relayed.status == 503
        assert (await relayed.json())["error"]["code"] == "spool_unavailable"


async def _a_healthy_store_is_200_with_its_backlog(tmp_path: Path) -> None:
    async with serving(build_store_app(config(tmp_path, tmp_path / "spool"), str(tmp_path / "t.duckdb"))) as store:
        status, body = await get(store, "/health")
        assert (status, body["status"], body["backlog"], body["storage"]["spool"]) == (200, "ok", 0, "ok")


async def _a_gateway_relaying_to_a_dead_store_is_503_naming_it(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    app = build_gateway_app(config(tmp_path, tmp_path / "spool"), str(tmp_path / "t.duckdb"),
                            store_url=f"http://127.0.0.1:{port}")
    async with serving(app) as gateway:
        status, body = await get(gateway, "/health")
    assert status == 503 and body["status"] == "degraded", body
    assert body["reason"].startswith(f"the trace store at 127.0.0.1:{port} is unreachable (")
    assert body["storage"]["spool"] == "ok"  # the gateway's own spool holds what waits


async def _a_gateway_says_what_its_store_reports_and_is_200_once_all_is_well(tmp_path: Path) -> None:
    broken = build_store_app(config(tmp_path / "s1", blocked(tmp_path)), str(tmp_path / "s1.duckdb"))
    healthy = build_store_app(config(tmp_path / "s2", tmp_path / "s2.spool"), str(tmp_path / "s2.duckdb"))
    seen = []
    for store_app in (broken, healthy):
        with elsewhere(store_app) as url:
            gw_app = build_gateway_app(config(tmp_path, tmp_path / "gw.spool"), str(tmp_path / "t.duckdb"),
                                       store_url=url)
            async with serving(gw_app) as gateway:
                seen.append(await get(gateway, "/health"))
    (status, body), healthy_answer = seen
    assert status == 503 and body["reason"].startswith("the trace store at 127.0.0.1:")
    assert " reports: trace spool unavailable (" in body["reason"]
    assert healthy_answer[0] == 200 and healthy_answer[1]["status"] == "ok"


async def _a_gateway_whose_store_writes_keep_failing_is_503_until_they_succeed(tmp_path: Path) -> None:
    """The poison batch: every write of the in-process store fails, retried (sink errors climbing)."""
    sink = FlakySink(down=True)
    emitter = TraceEmitter(sink, spool_dir=tmp_path / "spool", sleep=lambda _: time.sleep(0.01),
                           sink_failing_after_s=0.0).start()
    cfg = config(tmp_path, tmp_path / "spool")
    hooks = StoreHooks(emitter, HttpTraceStore(f"http://127.0.0.1:{free_port()}"))
    try:
        async with serving(Gateway(cfg, build_router(cfg), hooks).build_app()) as gateway:
            assert (await get(gateway, "/health"))[0] == 200  # nothing written yet: nothing failed
            emitter.emit(next(iter(TraceFactory(seed=4).traces(1))))
            assert await wait_until_async(lambda: emitter.stats.sinks["store"].failed > 0, 10)
            status, body = await get(gateway, "/health")
            assert status == 503 and body["reason"].startswith("the trace store's writes have failed for ")
            assert body["storage"]["store_failed_writes"] > 0
            sink.down = False
            assert await wait_until_async(lambda: emitter.backlog_size() == 0, 10)
            assert (await get(gateway, "/health"))[0] == 200
    finally:
        emitter.close()


def test_the_store_is_503_while_its_spool_takes_nothing_and_refuses_the_relay(tmp_path: Path) -> None:
    asyncio.run(_the_store_is_503_while_its_spool_takes_nothing_and_refuses_the_relay(tmp_path))


def test_a_healthy_store_is_200_with_its_backlog(tmp_path: Path) -> None:
    asyncio.run(_a_healthy_store_is_200_with_its_backlog(tmp_path))


def test_a_gateway_relaying_to_a_dead_store_is_503_naming_it(tmp_path: Path) -> None:
    asyncio.run(_a_gateway_relaying_to_a_dead_store_is_503_naming_it(tmp_path))


def test_a_gateway_says_what_its_store_reports_and_is_200_once_all_is_well(tmp_path: Path) -> None:
    asyncio.run(_a_gateway_says_what_its_store_reports_and_is_200_once_all_is_well(tmp_path))


def test_a_gateway_whose_store_writes_keep_failing_is_503_until_they_succeed(tmp_path: Path) -> None:
    asyncio.run(_a_gateway_whose_store_writes_keep_failing_is_503_until_they_succeed(tmp_path))
