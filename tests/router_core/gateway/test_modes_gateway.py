"""The economics features through a real gateway: router modes, degraded steps, affinity, budgets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas import RoutingMode
from schemas.config import RouteLensConfig
from schemas.records import RouterEvent
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream

CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}


class EventHooks(MemoryHooks):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[RouterEvent] = []

    def record_event(self, event: RouterEvent) -> None:
        self.events.append(event)


class Clock:
    def __init__(self, step: float = 1e-6) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


@asynccontextmanager
async def gateway(instances: dict[str, dict[str, Any]], economics: dict[str, Any], kv: float = 0.1,
                  router: dict[str, Any] | None = None, router_perf: Clock | None = None,
                  status: dict[str, int] | None = None, clock: Clock | None = None,
                  ) -> AsyncIterator[tuple[TestClient[Any, Any], EventHooks, Gateway]]:
    async with AsyncExitStack() as stack:
        servers = {iid: TestServer(upstream(reply((status or {}).get(iid, 200)), kv)) for iid in instances}
        for server in servers.values():
            await server.start_server()
            stack.push_async_callback(server.close)
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": iid, "url": str(s.make_url("")).rstrip("/"), **instances[iid]}
                                    for iid, s in servers.items()]},
            "router": router or {},
            "gateway": {"max_attempts": 2, "upstream_timeout_s": 5.0}, "scrape": {"interval_s": 60},
            "economics": economics,
            "constraints": [{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85, "exit_for": 0}],
        })
        hooks = EventHooks()
        ids = iter(f"req-{i}" for i in range(1000))
        built = build_router(config, **({"perf": router_perf} if router_perf else {}))
        gw = Gateway(config, built, hooks, new_id=lambda: next(ids), **({"clock": clock} if clock else {}))
        client = await stack.enter_async_context(TestClient(TestServer(gw.build_app())))
        yield client, hooks, gw


async def _chat(client: TestClient[Any, Any], hooks: EventHooks, body: dict[str, Any] = CHAT,
                headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
    resp = await client.post("/v1/chat/completions", json=body, headers=headers or {})
    payload = await resp.read()
    return resp.status, payload, hooks.traces[resp.headers["x-request-id"]]


async def _state(client: TestClient[Any, Any]) -> dict[str, Any]:
    resp = await client.get("/v1/router/state")
    return orjson.loads(await resp.read())  # type: ignore[no-any-return]


def test_slow_decisions_put_the_gateway_in_static_mode_and_back() -> None:
    async def run() -> None:
        perf = Clock(step=0.02)  # each perf reading 20 ms on: every decision is far over 50 ms
        two = {"a": {"model": "m"}, "b": {"model": "m"}}
        async with gateway(two, {}, router_perf=perf) as (client, hooks, _):
            for _ in range(5):
                assert (await _chat(client, hooks))[2].mode is RoutingMode.NORMAL
            assert (await _state(client))["router_mode"]["mode"] == "static"
            assert [e.kind for e in hooks.events] == ["router_mode"] and "static" in hooks.events[0].message
            perf.step = 1e-6
            served = set()
            for _ in range(3):
                _, _, trace = await _chat(client, hooks)
                assert trace.mode is RoutingMode.STATIC and trace.fallback_reason.startswith("router in static")
                served.add(trace.selected_instance)
            assert served == {"a", "b"}  # round robin
            assert (await _chat(client, hooks))[2].mode is RoutingMode.NORMAL
            assert len(hooks.events) == 2
            metrics = (await (await client.get("/metrics")).read()).decode()
            assert 'routelens_router_mode_switches_total{mode="static"} 1.0' in metrics

    asyncio.run(run())


def test_misroute_feedback_puts_the_gateway_in_safe_mode_and_back() -> None:
    async def run() -> None:
        fleet = {"a": {"model": "m"}, "b": {"model": "stable"}}
        econ = {"router_modes": {"safe_model": "stable", "min_feedback": 2}}
        clock = Clock(step=0.0)
        async with gateway(fleet, econ, clock=clock) as (client, hooks, gw):
            traces = [(await _chat(client, hooks))[2] for _ in range(6)]
            for tr in traces:
                clock.t += 20
                resp = await client.post("/v1/feedback", json={"request_id": tr.request_id, "correct": False})
                assert resp.status == 202
            state = (await _state(client))["router_mode"]
            assert state["mode"] == "safe" and state["misroute_rate"] == 1.0
            _, _, trace = await _chat(client, hooks)
            assert trace.mode is RoutingMode.SAFE and trace.selected_model == "stable"
            clock.t += 400  # the verdicts leave the window: the share is below 5% for five minutes
            _, _, trace = await _chat(client, hooks)
            clock.t += 400
            _, _, trace = await _chat(client, hooks)
            assert trace.mode is RoutingMode.NORMAL and (await _state(client))["router_mode"]["mode"] == "normal"
            assert [e.message.split(":")[0] for e in hooks.events] == ["router mode safe", "router mode normal"]

    asyncio.run(run())


def test_degraded_steps_run_in_order_and_the_cache_answer_never_reaches_the_trace() -> None:
    async def run() -> None:
        econ = {"degraded": {"steps": ["shed_features", "cap_max_tokens", "cache", "responder", "reject"],
                             "cache": {"enabled": True}, "responder": {"name": "rules-engine", "canned": "busy"}}}
        one = {"a": {"model": "m"}}
        async with gateway(one, econ, kv=0.99, router={"on_empty": "reject"}) as (client, hooks, gw):
            body = {**CHAT, "logprobs": True, "n": 2}
            status, payload, trace = await _chat(client, hooks, body)
            assert status == 200 and orjson.loads(payload)["choices"][0]["message"]["content"] == "busy"
            assert trace.mode is RoutingMode.RULES and "answered by responder rules-engine" in trace.fallback_reason
            steps = [s.step for s in trace.decision_trace if s.step.startswith("degrade/")]
            assert steps == ["degrade/shed_features", "degrade/cap_max_tokens", "degrade/cache", "degrade/responder"]
            assert [s.seq for s in trace.decision_trace] == list(range(len(trace.decision_trace)))
            key = gw.answers.key("auto", "hello", CHAT)
            assert key is not None
            gw.answers.put(key, b'{"secret-answer": 1}', "application/json")
            status, payload, trace = await _chat(client, hooks)
            assert status == 200 and payload == b'{"secret-answer": 1}'
            assert trace.mode is RoutingMode.CACHE and "secret-answer" not in trace.model_dump_json()

    asyncio.run(run())


def test_the_answer_cache_is_off_by_default_and_a_plain_reject_is_a_503() -> None:
    async def run() -> None:
        async with gateway({"a": {"model": "m"}}, {}, kv=0.99, router={"on_empty": "reject"}) as (client, hooks, gw):
            status, _, trace = await _chat(client, hooks)
            assert status == 503 and not gw.answers.is_enabled and len(gw.answers) == 0
            assert not [s for s in trace.decision_trace if s.step.startswith("degrade/")]

    asyncio.run(run())


def test_a_session_stays_on_its_instance_and_moves_when_it_fails() -> None:
    async def run() -> None:
        two = {"a": {"model": "m"}, "b": {"model": "m"}}
        econ = {"affinity": {"header": "x-ticket-id"}}
        async with gateway(two, econ) as (client, hooks, gw):
            served = set()
            for _ in range(4):
                _, _, trace = await _chat(client, hooks, headers={"x-ticket-id": "T-1"})
                step = next(s for s in trace.decision_trace if s.step == "affinity")
                assert step.reason.startswith("session kept on")
                served.add(trace.selected_instance)
            assert len(served) == 1
            bound = served.pop()
            other = "b" if bound == "a" else "a"
            await gw.shared.rebind("affinity:T-1", other, 60)
            _, _, trace = await _chat(client, hooks, headers={"x-ticket-id": "T-1"})
            assert trace.selected_instance == other

    asyncio.run(run())


def test_budgets_stop_the_expensive_model_and_show_in_state_and_metrics() -> None:
    async def run() -> None:
        fleet = {"a": {"model": "big", "cost": {"base": 2.0}}, "b": {"model": "small", "cost": {"base": 1.0}}}
        econ = {"budgets": {"bands": [{"name": "all-day", "hours": [[0, 24]], "models": ["big"], "max_spend": 4.0}]}}
        async with gateway(fleet, econ) as (client, hooks, gw):
            for _ in range(6):
                await _chat(client, hooks)
            gw.budgets.record("big", 2.0, gw.wall())
            gw.budgets.record("big", 2.0, gw.wall())
            _, _, trace = await _chat(client, hooks)
            assert trace.selected_model == "small"
            a = next(c for c in trace.candidates if c.instance == "a")
            assert not a.feasible and a.violations[0].constraint == "budget"
            (row,) = (await _state(client))["budgets"]
            assert row["band"] == "all-day" and row["stopped"] and row["spend"] >= 4.0
            metrics = (await (await client.get("/metrics")).read()).decode()
            assert 'routelens_budget_spend{band="all-day"}' in metrics

    asyncio.run(run())
