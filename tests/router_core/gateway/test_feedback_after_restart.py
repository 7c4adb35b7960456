"""A second verdict after a gateway restart: the claims start again, the store's verdicts do not.

Two gateways in turn over one set of hooks (what the store holds outlives the first gateway), each a
real aiohttp server in front of real upstream servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from itertools import count
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from tests.router_core.gateway.gateway_kit import CHAT, started_fleet
from tests.router_core.gateway.test_callers import openai_error, quality
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply

Client = TestClient[Any, Any]


class AskedHooks(MemoryHooks):
    """Memory hooks as a store: counts what the gateway asks of it, and can fail to answer."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []
        self.failing = False

    def has_stored_verdict(self, request_id: str) -> bool:
        self.asked.append(request_id)
        if self.failing:
            raise ConnectionError("store process at http://127.0.0.1:1 unreachable")
        return super().has_stored_verdict(request_id)


@asynccontextmanager
async def gateways(hooks: AskedHooks) -> AsyncIterator[Any]:
    """Yield ``start()``: a fresh gateway (empty claims, nothing learned) over ``hooks``, as after a restart."""
    async with AsyncExitStack() as stack:
        config = await started_fleet(stack, {"a": reply(200), "b": reply(200)})
        ids = (f"req-{i}" for i in count())

        async def start() -> Client:
            gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids))
            return await stack.enter_async_context(TestClient(TestServer(gw.build_app())))

        yield start


async def judge(client: Client, request_id: str) -> tuple[int, bytes]:
    resp = await client.post("/v1/feedback", json={"request_id": request_id, "correct": False,
                                                   "expected_class": "chat"})
    return resp.status, await resp.read()


def test_a_fresh_gateway_refuses_a_verdict_the_store_holds_and_takes_one_it_does_not() -> None:
    async def main() -> None:
        hooks = AskedHooks()
        async with gateways(hooks) as start:
            before = await start()
            for rid in ("judged", "fresh"):
                resp = await before.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": rid})
                assert resp.status == 200
            assert (await judge(before, "judged"))[0] == 202
            assert [f.request_id for f in hooks.feedback] == ["judged"]
            hooks.asked.clear()  # (the first verdict asked too: the store held none)

            after = await start()  # the restart: no claims, nothing learned
            assert await quality(after) == []
            status, body = await judge(after, "judged")
            assert status == 409, body  # was 202: accepted, learned, then quarantined by the store
            error = openai_error(body)
            assert error["code"] == "feedback_exists" and error["param"] == "request_id"
            assert "recorded before" in error["message"]
            assert [f.request_id for f in hooks.feedback] == ["judged"]  # stored nothing
            assert await quality(after) == []  # learned nothing
            assert (await judge(after, "judged"))[0] == 409
            assert hooks.asked == ["judged"]  # the claim was kept: the second refusal did not ask again

            status, body = await judge(after, "fresh")  # no verdict stored: taken as before
            assert status == 202 and orjson.loads(body)["learned"]["class"] == "chat"
            assert [f.request_id for f in hooks.feedback] == ["judged", "fresh"]
            assert (await judge(after, "fresh"))[0] == 409  # and then claimed here
            assert hooks.asked == ["judged", "fresh"]
            assert (await judge(after, "never-sent"))[0] == 404  # no trace: the store is not asked
            assert hooks.asked == ["judged", "fresh"]

    asyncio.run(main())


def test_a_store_that_cannot_answer_accepts_the_verdict_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        hooks = AskedHooks()
        async with gateways(hooks) as start:
            before = await start()
            for rid in ("r1", "r2", "r3", "r4"):
                resp = await before.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": rid})
                assert resp.status == 200
            assert (await judge(before, "r1"))[0] == 202

            after = await start()
            hooks.failing = True
            with caplog.at_level(logging.INFO, logger="router_core.gateway.verdicts"):
                assert (await judge(after, "r2"))[0] == 202  # not a 5xx: accepted as before
                assert (await judge(after, "r3"))[0] == 202
                warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
                assert len(warnings) == 1, caplog.text  # once, not once per verdict
                assert "r2" in warnings[0].getMessage() and "ConnectionError" in warnings[0].getMessage()
                assert warnings[0].exc_info is None
                assert "hello" not in caplog.text  # the query text never reaches a log
                hooks.failing = False
                assert (await judge(after, "r1"))[0] == 409  # it answers again: r1 was judged before
                assert (await judge(after, "r4"))[0] == 202
            assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO]
            assert [f.request_id for f in hooks.feedback] == ["r1", "r2", "r3", "r4"]

    asyncio.run(main())

