"""``GET /health`` asks the trace hooks, whose ``health()`` may be async (it asks the store process).

The audit: ``/health`` stayed 200 while storage failed, because the hooks' check was never
called with anything to say. An async check (the serving hooks ask the store over loopback) is
awaited, and one that hangs or breaks is a reason, never a 500 or a hung ``/health``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway, ops_routes
from tests.router_core.gateway.gateway_kit import metrics_only_fleet
from tests.router_core.gateway.test_forwarding import MemoryHooks


class AsyncHealthHooks(MemoryHooks):
    """Hooks that report their storage as ``serve``'s do: an awaited check and a storage state."""

    def __init__(self, reason: str | None, *, hang: bool = False, broken: bool = False) -> None:
        super().__init__()
        self.reason, self.hang, self.broken = reason, hang, broken

    async def health(self) -> str | None:
        if self.hang:
            await asyncio.sleep(3600)
        if self.broken:
            raise OSError("no route")
        await asyncio.sleep(0)
        return self.reason

    def storage_state(self) -> dict[str, Any]:
        return {"spool": "ok", "pending": 0}


async def health_of(hooks: MemoryHooks) -> tuple[int, Any]:
    async with metrics_only_fleet({"interval_s": 60}) as cfg:
        gateway = Gateway(cfg, build_router(cfg), hooks)
        async with TestClient(TestServer(gateway.build_app())) as client:
            resp = await client.get("/health")
            return resp.status, orjson.loads(await resp.read())


def test_an_async_storage_problem_makes_health_503_with_its_reason() -> None:
    reason = "the trace store at 127.0.0.1:8090 is unreachable (ClientConnectorError: refused)"
    assert asyncio.run(health_of(AsyncHealthHooks(reason))) == (
        503, {"status": "degraded", "reason": reason, "storage": {"spool": "ok", "pending": 0}})


def test_no_storage_problem_is_200() -> None:
    assert asyncio.run(health_of(AsyncHealthHooks(None))) == (200, {"status": "ok",
                                                                    "storage": {"spool": "ok", "pending": 0}})


def test_a_broken_or_hanging_check_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops_routes, "HOOKS_HEALTH_TIMEOUT_S", 0.2)
    broken = asyncio.run(health_of(AsyncHealthHooks(None, broken=True)))
    hung = asyncio.run(health_of(AsyncHealthHooks(None, hang=True)))
    assert broken[0] == 503 and broken[1]["reason"] == "trace hooks health check failed: OSError"
    assert hung[0] == 503 and hung[1]["reason"] == "trace hooks health check did not answer within 0.2s"


class SilentStorageHooks(MemoryHooks):
    """Hooks whose storage has nothing to tell (``storage_state`` None), and a storage problem to report."""

    def storage_state(self) -> dict[str, Any] | None:
        return None

    def health(self) -> str | None:
        return "trace spool stalled"


def test_hooks_with_no_storage_state_leave_storage_out_of_health() -> None:
    # before: /health showed "storage": null for such hooks (only hooks without the method left it out)
    assert asyncio.run(health_of(SilentStorageHooks())) == (503, {"status": "degraded",
                                                                  "reason": "trace spool stalled"})
