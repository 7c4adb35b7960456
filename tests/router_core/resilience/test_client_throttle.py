"""The client throttle and priority shedding: a key hammering gets 429 + Retry-After, other keys are served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pydantic import ValidationError

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.policy_gate import PolicyGate
from router_core.resilience.client_throttle import ClientThrottle, client_key
from router_core.rules.ir import Origin, Rule, Throttle
from router_core.rules.throttle import Throttles
from router_core.shared.base import MemoryShared
from schemas.config import RouteLensConfig
from schemas.config.shared import ThrottleSettings
from tests.router_core.gateway.test_forwarding import KV, OK_BODY, MemoryHooks, upstream


class Kit:
    """An in-process gateway with ``throttles`` set, its traces, upstream call count and a settable clock."""

    def __init__(self, client: TestClient[Any, Any], hooks: MemoryHooks, calls: list[int], now: list[float]) -> None:
        self.client, self.hooks, self.calls, self.now = client, hooks, calls, now

    async def chat(self, text: str = "hello", **headers: str) -> Any:
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        return await self.client.post("/v1/chat/completions", json=body, headers=headers)


@asynccontextmanager
async def throttled_gateway(throttles: dict[str, Any]) -> AsyncIterator[Kit]:
    """A gateway over one stub instance with ``throttles:`` as given (buckets on a virtual clock)."""
    calls = [0]

    async def chat(_: web.Request) -> web.Response:
        calls[0] += 1
        return web.Response(body=orjson.dumps(OK_BODY), content_type="application/json")

    async with AsyncExitStack() as stack:
        server = TestServer(upstream(chat, KV["a"]))
        await server.start_server()
        stack.push_async_callback(server.close)
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": "a", "model": "m", "url": str(server.make_url("")).rstrip("/")}]},
            "scrape": {"interval_s": 60}, "throttles": throttles,
        })
        now = [1000.0]
        hooks = MemoryHooks()
        ids = iter(f"req-{i}" for i in range(1000))
        gate = PolicyGate(config, None, clock=lambda: now[0])
        gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids), policy=gate)
        client = await stack.enter_async_context(TestClient(TestServer(gw.build_app())))
        yield Kit(client, hooks, calls, now)


def test_one_key_hammering_gets_429_with_retry_after_while_another_key_is_served() -> None:
    async def run() -> None:
        async with throttled_gateway({"client": {"rate": 1, "burst": 3}}) as kit:
            hammer = [await kit.chat(Authorization="Bearer sk-hammer") for _ in range(10)]
            assert [r.status for r in hammer] == [200] * 3 + [429] * 7
            refused = hammer[-1]
            assert int(refused.headers["Retry-After"]) == 1
            err = (await refused.json())["error"]
            assert err["type"] == "rate_limit_error" and err["code"] == "client_rate_limited"
            trace = kit.hooks.traces[refused.headers["x-request-id"]]
            assert trace.outcome.http_status == 429 and trace.outcome.error_class == "client_rate_limited"
            assert trace.attempts == []
            assert kit.calls == [3]  # nothing of the refused ones was forwarded
            other = [await kit.chat(Authorization="Bearer sk-calm") for _ in range(3)]
            assert [r.status for r in other] == [200] * 3  # its own bucket, full
            kit.now[0] += 1.0  # one token back for the hammer
            assert (await kit.chat(Authorization="Bearer sk-hammer")).status == 200
            assert (await kit.chat(Authorization="Bearer sk-hammer")).status == 429

    asyncio.run(run())


def test_without_a_key_the_configured_header_then_the_address_names_the_client() -> None:
    async def run() -> None:
        async with throttled_gateway({"client": {"rate": 1, "burst": 1,
                                                 "key": ["authorization", "header:x-tenant", "address"]}}) as kit:
            assert (await kit.chat(**{"x-tenant": "t1"})).status == 200
            assert (await kit.chat(**{"x-tenant": "t1"})).status == 429
            assert (await kit.chat(**{"x-tenant": "t2"})).status == 200
            assert (await kit.chat()).status == 200  # the address (127.0.0.1), a bucket of its own
            assert (await kit.chat()).status == 429

    asyncio.run(run())


def test_shedding_refuses_low_priority_first_and_keeps_a_reserve_for_high() -> None:
    async def run() -> None:
        shed = {"rate": 0.001, "burst": 10, "reserve": {"high": 0.0, "normal": 0.2, "low": 0.5}}
        async with throttled_gateway({"shedding": shed}) as kit:
            low = [(await kit.chat(**{"x-priority": "low"})).status for _ in range(7)]
            assert low == [200] * 5 + [429] * 2  # low stops with 5 of 10 left
            refused = await kit.chat(**{"x-priority": "low"})
            assert (await refused.json())["error"]["code"] == "shed_low" and "Retry-After" in refused.headers
            normal = [(await kit.chat()).status for _ in range(4)]
            assert normal == [200] * 3 + [429]  # normal stops with 2 left
            high = [(await kit.chat(**{"x-priority": "high"})).status for _ in range(3)]
            assert high == [200, 200, 429]  # high takes the reserve

    asyncio.run(run())


def test_client_keys_hash_secrets_and_fall_back_in_order() -> None:
    sources = ["authorization", "header:x-tenant", "address"]
    by_key = client_key(sources, {"Authorization": "Bearer sk-secret", "x-tenant": "t"}, "10.0.0.1")
    assert by_key.startswith("key:") and "sk-secret" not in by_key
    assert client_key(sources, {"Authorization": "Basic abc", "x-tenant": "t"}, "10.0.0.1").startswith("hdr:x-tenant:")
    assert client_key(sources, {}, "10.0.0.1") == "addr:10.0.0.1"
    assert client_key(["authorization"], {}, None) == "anonymous"


def test_a_header_value_that_is_not_utf8_is_a_key_of_its_own_bytes_not_an_error() -> None:
    raw = [b"t-\xff", b"t-\xfe"]  # as aiohttp decodes them: strings holding lone surrogates
    got = [client_key(["header:x-tenant"], {"x-tenant": v.decode("utf-8", "surrogateescape")}, None) for v in raw]
    assert got[0] != got[1] and all(k.startswith("hdr:x-tenant:") and "t-" not in k for k in got)
    assert client_key(["header:x-tenant"], {"x-tenant": "acme"}, None) == client_key(
        ["header:x-tenant"], {"x-tenant": " acme "}, None)  # valid values: keys as before
    bearer = client_key(["authorization"], {"Authorization": "Bearer sk-" + "\udcff"}, None)
    assert bearer.startswith("key:")


def test_retry_after_is_the_time_until_a_token() -> None:
    now = [0.0]
    throttle = ClientThrottle(ThrottleSettings.model_validate({"client": {"rate": 0.25, "burst": 1}}),
                              MemoryShared(lambda: now[0]))

    async def run() -> None:
        assert await throttle.admit({}, "1.2.3.4") is None
        refusal = await throttle.admit({}, "1.2.3.4")
        assert refusal is not None and refusal.retry_after_s == pytest.approx(4.0)
        assert refusal.headers() == {"Retry-After": "4"}

    asyncio.run(run())


@pytest.mark.parametrize("bad", [
    {"client": {"rate": 0, "burst": 1}},
    {"client": {"rate": 1, "burst": 1, "key": "cookie"}},
    {"shedding": {"rate": 1, "burst": 1, "reserve": {"low": 0.0, "normal": 0.5}}},
    {"shedding": {"rate": 1, "burst": 1, "reserve": {"low": 1.5}}},
    {"prefilter": {"patterns": [{"name": "x", "regex": "("}]}},
    {"client": {"rate": 1, "burst": 1, "extra": True}},
], ids=["rate", "key-source", "reserve-order", "reserve-range", "regex", "unknown-field"])
def test_bad_throttle_settings_fail_validation(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ThrottleSettings.model_validate(bad)


def test_a_rule_bucket_on_shared_state_is_one_bucket_for_every_gate_sharing_it() -> None:
    now = [0.0]
    shared = MemoryShared(lambda: now[0])
    rule = Rule(name="r", origin=Origin("p.yaml", 1), throttle=Throttle(rate=1, burst=2, overflow="reject"))
    one, two = Throttles(lambda: now[0], shared), Throttles(lambda: now[0], shared)  # two replicas

    async def run() -> None:
        assert (await one.admit(rule)).admitted and (await two.admit(rule)).admitted
        refused = await one.admit(rule)
        assert not refused.admitted and refused.action == "reject" and refused.retry_after_s == pytest.approx(1.0)
        assert shared.tokens("rule:r") == pytest.approx(0.0)
        now[0] += 1.0
        assert (await two.admit(rule)).admitted

    asyncio.run(run())
