"""An upstream's 429 through a real gateway: retried elsewhere, its instance held out for its Retry-After, then tried
again; every attempt refused so: the client's 429 with Retry-After; such traces replay exactly."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from router_core.decide.replay import redecide
from router_core.decide.verify import first_difference
from router_core.gateway import Gateway
from schemas.trace import DecisionTrace
from tests.router_core.decide.test_exact_replay import stored
from tests.router_core.gateway.gateway_kit import CHAT, served_gateway, trace_of
from tests.router_core.gateway.test_breakers_gateway import Clock
from tests.router_core.gateway.test_forwarding import OK_BODY, MemoryHooks


class Limited:
    """An upstream answering 429 with ``retry_after`` (None: no header) while ``limited``, else 200."""

    def __init__(self, retry_after: str | None) -> None:
        self.retry_after, self.limited = retry_after, True
        self.models: list[str] = []  # the model of every request received

    async def handle(self, request: web.Request) -> web.Response:
        self.models.append((await request.json())["model"])
        if not self.limited:
            answer = {**OK_BODY, "model": self.models[-1]}
            return web.Response(body=orjson.dumps(answer), content_type="application/json")
        headers = {} if self.retry_after is None else {"Retry-After": self.retry_after}
        body = {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}
        return web.Response(status=429, body=orjson.dumps(body), content_type="application/json", headers=headers)

    @property
    def calls(self) -> int:
        return len(self.models)


def replays(gw: Gateway, trace: DecisionTrace) -> bool:
    """Re-decided from its stored JSON under the stored policy: the same decision."""
    policy, rules = stored(gw.config, None)
    again = DecisionTrace.model_validate_json(trace.model_dump_json())
    return first_difference(again, redecide(again, policy, rules)) is None


async def post(client: Any, hooks: MemoryHooks) -> tuple[Any, DecisionTrace]:
    got = await client.post("/v1/chat/completions", json=CHAT)
    await got.read()
    return got, trace_of(hooks, got.headers)


async def settle(gw: Gateway, instance: str, state: str) -> None:
    """Let the breaker hub's sweep (every 0.1 s) run until ``instance``'s breaker is in ``state``."""
    for _ in range(40):
        await asyncio.sleep(0.05)
        if gw.breakers.get("instance", instance).state.label == state:  # type: ignore[union-attr]
            return


def test_a_429_fails_over_holds_its_instance_for_its_retry_after_then_it_is_tried_again() -> None:
    asyncio.run(_held())


async def _held() -> None:
    clock, a, b = Clock(), Limited("30"), Limited(None)
    b.limited = False
    async with served_gateway({"a": a.handle, "b": b.handle}, gateway={"max_attempts": 2}, perf=clock) as (
            client, hooks, gw):
        got, first = await post(client, hooks)  # a (ranked first) says 429: b answers
        assert got.status == 200 and got.headers["x-routelens-instance"] == "b"
        assert [(x.instance, x.http_status) for x in first.attempts] == [("a", 429), ("b", 200)]
        held = gw.breakers.get("instance", "a")
        assert held is not None and held.state.label == "open" and "429" in held.reason
        got, second = await post(client, hooks)  # a is held out: not asked at all
        assert [x.instance for x in second.attempts] == ["b"] and a.calls == 1
        a_eval = next(c for c in second.candidates if c.instance == "a")
        assert [v.metric for v in a_eval.violations] == ["breaker_instance"] and "429" in a_eval.violations[0].reason
        assert replays(gw, first) and replays(gw, second)
        text = await (await client.get("/metrics")).text()
        assert 'routelens_breaker_state{name="a",scope="instance"} 2.0' in text
        clock.t += 29  # not yet (the instance breaker's own open_s, 5 s, is not what ends a hold)
        await settle(gw, "a", "half_open")
        got, third = await post(client, hooks)
        assert [x.instance for x in third.attempts] == ["b"] and a.calls == 1
        a.limited = False
        clock.t += 1.5  # the hold is over: half-open, the next request is a's trial
        await settle(gw, "a", "half_open")
        got, fourth = await post(client, hooks)
        assert got.status == 200 and [x.instance for x in fourth.attempts] == ["a"] and a.calls == 2
        assert replays(gw, fourth)


def test_every_attempt_answered_429_gives_the_client_a_429_with_the_soonest_retry_after() -> None:
    asyncio.run(_all_limited())


async def _all_limited() -> None:
    clock, a, b = Clock(), Limited("7"), Limited("2.5")
    async with served_gateway({"a": a.handle, "b": b.handle}, gateway={"max_attempts": 2}, perf=clock) as (
            client, hooks, gw):
        got, trace = await post(client, hooks)
        assert got.status == 429, await got.text()
        assert got.headers["Retry-After"] == "3"  # the soonest hold (b's 2.5 s), whole seconds up
        assert got.headers["x-routelens-instance"] == "b"  # the last instance tried
        error = (await got.json())["error"]
        assert error["type"] == "rate_limit_error" and error["code"] == "rate_limit_exceeded"
        assert [(x.instance, x.http_status) for x in trace.attempts] == [("a", 429), ("b", 429)]
        assert trace.outcome.http_status == 429 and replays(gw, trace)
        gw.view.tick()  # refused fast: errors, not fast latencies
        snap = gw.view.snapshot()["a"]
        assert snap.error_rate == 1.0 and snap.window_requests == 1 and snap.p95_latency_ms is None
        clock.t += 1  # both held: nothing is sent, the client is told when the first hold ends
        got, again = await post(client, hooks)
        assert got.status == 429 and got.headers["Retry-After"] == "2" and "x-routelens-instance" not in got.headers
        assert again.attempts == [] and (a.calls, b.calls) == (1, 1)
        assert replays(gw, again)


def test_a_429_without_retry_after_holds_its_instance_a_second() -> None:
    asyncio.run(_default_hold())


async def _default_hold() -> None:
    clock, a, b = Clock(), Limited(None), Limited("not a number")
    async with served_gateway({"a": a.handle, "b": b.handle}, gateway={"max_attempts": 2}, perf=clock) as (
            client, hooks, gw):
        got, _ = await post(client, hooks)
        assert got.status == 429 and got.headers["Retry-After"] == "1"
        assert gw.breakers.held_for("a") == 1.0 and gw.breakers.held_for("b") == 1.0


def test_the_upstream_gets_its_own_model_name_and_the_client_and_trace_the_fleet_s() -> None:
    asyncio.run(_upstream_model())


async def _upstream_model() -> None:
    a = Limited(None)
    a.limited = False
    async with served_gateway({"a": a.handle}, instances={"a": {"upstream_model": "provider-m-2025"}}) as (
            client, hooks, _):
        got, trace = await post(client, hooks)
        assert got.status == 200 and a.models == ["provider-m-2025"]
        assert got.headers["x-routelens-model"] == "m" and trace.attempts[0].model == "m"
        assert (await got.json())["model"] == "provider-m-2025"  # the upstream's answer, relayed as it was


def test_with_on_empty_reject_every_instance_held_is_a_429_not_a_503() -> None:
    asyncio.run(_held_reject())


async def _held_reject() -> None:
    # Before, the second request was a 503 no_feasible_instance: "nothing can serve this", while it
    # only has to wait for the soonest Retry-After.
    clock, a, b = Clock(), Limited("7"), Limited("2.5")
    async with served_gateway({"a": a.handle, "b": b.handle}, gateway={"max_attempts": 2}, perf=clock,
                              sections={"router": {"on_empty": "reject"}}) as (client, hooks, gw):
        got, _ = await post(client, hooks)
        assert got.status == 429
        clock.t += 1
        got, again = await post(client, hooks)
        assert got.status == 429 and got.headers["Retry-After"] == "2", await got.text()
        error = (await got.json())["error"]
        assert error["code"] == "rate_limit_exceeded" and "held out after its upstream's 429" in error["message"]
        assert again.attempts == [] and again.fallback_reason is not None and "reject" in again.fallback_reason
        assert again.outcome.http_status == 429 and replays(gw, again)
