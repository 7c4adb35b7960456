"""An instance's price of one request is ``cost.base`` times ``cost.surge_multiplier`` in ``routing.peak_hours``.

Seed 000's cost table (基准成本 1.8 / 1.0, 高峰溢价系数 2.1 / 1.2): the premium was declared and read
nowhere. The price at the request's time (local hours in ``routing.timezone``) is what the cost
scorer compares, what the trace records as the outcome's cost and what budgets count.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from aiohttp.test_utils import TestClient, TestServer

from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.gateway import Gateway
from router_core.state.quality import QualityTable
from schemas import InstanceSnapshot, RequestFeatures
from schemas.config import RouteLensConfig
from schemas.fleet import CostSpec
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream
from tests.router_core.gateway.test_streaming import streamer

SHIPPED = Path(__file__).resolve().parents[2] / "routelens.yaml"
SHANGHAI = ZoneInfo("Asia/Shanghai")
V4 = CostSpec(base=1.8, surge_multiplier=2.1)  # the seed's deepseek-v4-32k row
CODER = CostSpec(base=1.0, surge_multiplier=1.2)


def shanghai(hour: int, minute: int = 0) -> datetime:
    """A UTC time that is ``hour:minute`` in Shanghai (UTC+8)."""
    return datetime(2026, 11, 30, hour, minute, tzinfo=SHANGHAI).astimezone(UTC)


@pytest.mark.parametrize(("hour", "minute", "v4", "coder"), [
    (10, 0, 1.8 * 2.1, 1.0 * 1.2),  # the morning peak [9, 12)
    (9, 0, 1.8 * 2.1, 1.0 * 1.2),
    (17, 59, 1.8 * 2.1, 1.0 * 1.2),  # the afternoon peak [14, 18)
    (12, 0, 1.8, 1.0),  # the bands are [start, end)
    (20, 0, 1.8, 1.0),
    (2, 0, 1.8, 1.0),  # the night
])
def test_the_shipped_fleet_is_priced_in_shanghai_peak_hours(hour: int, minute: int, v4: float, coder: float) -> None:
    policy = build_router(read_config(SHIPPED)).policy
    assert policy.price(V4, shanghai(hour, minute)) == pytest.approx(v4)
    assert policy.price(CODER, shanghai(hour, minute)) == pytest.approx(coder)


def test_peak_hours_are_local_to_routing_timezone_not_utc() -> None:
    utc = build_router(RouteLensConfig.model_validate({"fleet": {"instances": [
        {"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]}})).policy  # routing.timezone: UTC (default)
    assert utc.price(V4, shanghai(10)) == pytest.approx(1.8)  # 02:00 UTC
    assert utc.price(V4, datetime(2026, 11, 30, 10, 0, tzinfo=UTC)) == pytest.approx(1.8 * 2.1)


# Three prices whose order the premium turns round: off peak "surgy" is the cheapest, at peak the dearest.
PRICED_FLEET = [
    {"id": "surgy", "model": "m1", "url": "http://127.0.0.1:1", "cost": {"base": 1.0, "surge_multiplier": 3.0}},
    {"id": "flat", "model": "m2", "url": "http://127.0.0.1:2", "cost": {"base": 2.0}},
    {"id": "mid", "model": "m3", "url": "http://127.0.0.1:3", "cost": {"base": 1.5}},
]


def cost_terms(now: datetime) -> tuple[str | None, dict[str, float]]:
    cfg = RouteLensConfig.model_validate({
        "fleet": {"instances": PRICED_FLEET}, "routing": {"timezone": "Asia/Shanghai"},
        "scoring": {"preset": "balanced", "weights": {"quality": 0, "latency": 0, "balance": 0, "cost": 1.0}},
    })
    router = build_router(cfg)
    state = {i["id"]: InstanceSnapshot(instance=i["id"], model=i["model"], kv_cache_usage=0.1, queue=0, running=0,
                                       scraped_at=now) for i in PRICED_FLEET}
    feats = RequestFeatures(requested_model="auto", n_messages=1, input_chars=40, est_input_tokens=10)
    ctx = DecisionContext(request_id="r", features=feats, intent=None, now=now, quality=QualityTable({}).snapshot())
    d = router.decide(ctx, state)
    at = [w["name"] for w in d.weights].index("cost")
    first = d.selected.id if d.selected is not None else None
    return first, {c["instance"]: c["score_terms"][at] for c in d.candidates}


def test_the_cost_scorer_compares_the_prices_at_the_request_time() -> None:
    first, terms = cost_terms(shanghai(20))  # off peak: 1.0, 2.0, 1.5
    assert first == "surgy" and terms == pytest.approx({"surgy": 1.0, "flat": 0.0, "mid": 0.5})
    first, terms = cost_terms(shanghai(10))  # peak: 3.0, 2.0, 1.5
    assert first == "mid" and terms == pytest.approx({"surgy": 0.0, "flat": 2 / 3, "mid": 1.0})


# A gateway over two instances of the 32k model, priced as the seed's table, with a clock we set.
Client = TestClient[Any, Any]


class Wall:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@asynccontextmanager
async def gateway(wall: Wall, sections: dict[str, Any], stream: bool = False,
                  ) -> AsyncIterator[tuple[Client, MemoryHooks, Gateway]]:
    async with AsyncExitStack() as stack:
        servers = {iid: TestServer(upstream(streamer() if stream else reply(200), kv))
                   for iid, kv in (("v4-a", 0.1), ("v4-b", 0.2))}
        for server in servers.values():
            await server.start_server()
            stack.push_async_callback(server.close)
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": iid, "model": "deepseek-v4-32k", "url": str(s.make_url("")).rstrip("/"),
                                     "cost": {"base": 1.8, "surge_multiplier": 2.1}} for iid, s in servers.items()]},
            "gateway": {"max_attempts": 2, "upstream_timeout_s": 5.0}, "scrape": {"interval_s": 60},
            "routing": {"timezone": "Asia/Shanghai"}, **sections,
        })
        hooks = MemoryHooks()
        ids = iter(f"req-{i}" for i in range(100))
        gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids), wall=wall)
        client = await stack.enter_async_context(TestClient(TestServer(gw.build_app())))
        yield client, hooks, gw


async def chat(client: Client, stream: bool = False) -> str:
    body = {"model": "deepseek-v4-32k", "messages": [{"role": "user", "content": "hello"}], "stream": stream}
    resp = await client.post("/v1/chat/completions", json=body)
    await resp.read()
    assert resp.status == 200
    return resp.headers["x-request-id"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_trace_records_the_price_at_the_request_time(stream: bool) -> None:
    async def run() -> None:
        wall = Wall(shanghai(10))
        async with gateway(wall, {}, stream) as (client, hooks, _):
            peak = await chat(client, stream)
            wall.now = shanghai(20)
            evening = await chat(client, stream)
        assert hooks.traces[peak].outcome.cost == pytest.approx(1.8 * 2.1)
        assert hooks.traces[evening].outcome.cost == pytest.approx(1.8)

    asyncio.run(run())


def test_a_budget_max_spend_counts_the_priced_cost() -> None:
    band = {"name": "day", "hours": [[0, 24]], "models": ["deepseek-v4-32k"], "max_spend": 10.0, "window_s": 86400}
    budgets = {"economics": {"budgets": {"timezone": "Asia/Shanghai", "bands": [band]}}}

    async def run() -> None:
        wall = Wall(shanghai(10))
        async with gateway(wall, budgets) as (client, _, gw):
            await chat(client)
            assert gw.budgets.view(wall.now).use == pytest.approx(1.8 * 2.1 / 10.0)
            wall.now = shanghai(20)  # the same day's window (UTC days: 02:00 and 12:00)
            await chat(client)
            (row,) = gw.budgets.state(wall.now)
        assert row["spend"] == pytest.approx(1.8 * 2.1 + 1.8)

    asyncio.run(run())
