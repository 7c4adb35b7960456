"""``gateway.stage_timers``: each stage of the chat route timed into /metrics when on, nothing timed when off."""

from __future__ import annotations

import asyncio
import re

import pytest
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas.config import RouteLensConfig
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


async def metrics_after(requests: int, timers: bool) -> str:
    server = TestServer(upstream(reply(200), 0.1))
    await server.start_server()
    config = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": str(server.make_url("")).rstrip("/")}]},
        "scrape": {"interval_s": 60}, "gateway": {"stage_timers": timers}})
    gateway = Gateway(config, build_router(config), MemoryHooks())
    async with TestClient(TestServer(gateway.build_app())) as client:
        for _ in range(requests):
            assert (await client.post("/v1/chat/completions", json=CHAT)).status == 200
        text = await (await client.get("/metrics")).text()
    await server.close()
    return text


@pytest.mark.parametrize("timers", [True, False])
def test_stage_timers_count_every_stage_only_when_on(timers: bool) -> None:
    text = asyncio.run(metrics_after(3, timers))
    counts = dict(re.findall(r'^routelens_gateway_stage_cpu_seconds_count\{stage="(\w+)"\} (\S+)$', text, re.M))
    if not timers:
        assert counts == {}
        return
    stages = ("screen", "analyse", "admit", "decide", "forward", "respond", "finish")
    assert {k: float(v) for k, v in counts.items()} == dict.fromkeys(stages, 3.0)
    sums = dict(re.findall(r'^routelens_gateway_stage_cpu_seconds_sum\{stage="(\w+)"\} (\S+)$', text, re.M))
    assert all(float(sums[s]) > 0 for s in stages)
