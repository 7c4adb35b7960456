"""What the trace and the response headers say about where a request went, through a real gateway on loopback.

An instance whose breaker refused it, or a half-open trial put ahead of the pick, is a step of the
trace; ``x-routelens-instance`` names the instance that answered and nothing else; a throttled
request keeps its rule; failing open never sends a prompt to an instance too small to hold it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.policy_gate import PolicyGate
from router_core.rules.load import compile_policy
from schemas import AttemptStatus, DecisionTrace, RoutingMode, StepKind
from schemas.config import RouteLensConfig
from tests.router_core.gateway.test_forwarding import OK_BODY, MemoryHooks

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
LONG = {"model": "auto", "messages": [{"role": "user", "content": "lorem ipsum dolor sit amet " * 460}]}  # ~3,100
OVERFLOW = {"error": {"message": "This model's maximum context length is 1024 tokens", "code": "context_length"}}
LATCH_AT_ONCE = {"constraints": [{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85, "exit_for": 0}]}


class Upstream:
    """One instance: its KV cache usage on /metrics, a fixed answer, and the chat requests it got."""

    def __init__(self, kv: float, status: int = 200, body: Any = OK_BODY) -> None:
        self.kv, self.status, self.body, self.calls = kv, status, body, 0

    async def chat(self, _: web.Request) -> web.Response:
        self.calls += 1
        return web.Response(status=self.status, body=orjson.dumps(self.body), content_type="application/json")

    async def metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=f'vllm:num_requests_waiting{{model_name="m"}} 0\nvllm:kv_cache_usage_perc {self.kv}\n')

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app


@asynccontextmanager
async def gateway(ups: dict[str, Upstream], instances: dict[str, dict[str, Any]] | None = None,
                  sections: dict[str, Any] | None = None, policy: str | None = None,
                  ) -> AsyncIterator[tuple[TestClient[Any, Any], Gateway, MemoryHooks]]:
    """A gateway over ``ups`` (model ``m`` unless ``instances`` says otherwise), its clock standing still."""
    async with AsyncExitStack() as stack:
        servers = {iid: TestServer(u.app()) for iid, u in ups.items()}
        for server in servers.values():
            await server.start_server()
            stack.push_async_callback(server.close)
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/"),
                                     **(instances or {}).get(iid, {})} for iid, s in servers.items()]},
            "gateway": {"max_attempts": 2, "upstream_timeout_s": 5.0},
            "scrape": {"interval_s": 60},
            "resilience": {"breakers": {"instance": {"open_s": 600, "stall_after_s": None}}},
            **(sections or {}),
        })
        hooks = MemoryHooks()
        ids = iter(f"req-{i}" for i in range(100))
        gate = None if policy is None else PolicyGate(config, compile_policy(policy, "policy.yaml", config))
        gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids), policy=gate,
                     perf=lambda: 1000.0)
        client = await stack.enter_async_context(TestClient(TestServer(gw.build_app())))
        yield client, gw, hooks


def move(gw: Gateway, name: str, to: str) -> None:
    """Put instance ``name``'s breaker in state ``to`` (as a replica's message would)."""
    assert gw.breakers.apply({"scope": "instance", "name": name, "to": to, "origin": "test", "reason": "crashed"})


def trace_of(hooks: MemoryHooks, resp: Any) -> DecisionTrace:
    return hooks.traces[resp.headers["x-request-id"]]


def steps(trace: DecisionTrace, prefix: str) -> list[tuple[str, str, list[str], list[str]]]:
    return [(s.step, s.reason, s.instances, s.rejected) for s in trace.decision_trace if s.step.startswith(prefix)]


def test_every_instance_refused_by_its_breaker_is_recorded_and_no_header_names_one() -> None:
    async def run() -> None:
        ups = {"a": Upstream(0.1), "b": Upstream(0.2)}
        async with gateway(ups) as (client, gw, hooks):
            move(gw, "a", "open")
            move(gw, "b", "open")
            resp = await client.post("/v1/chat/completions", json=CHAT)
            body = await resp.json()
            trace = trace_of(hooks, resp)
        assert resp.status == 502 and ups["a"].calls == ups["b"].calls == 0
        assert "x-routelens-instance" not in resp.headers and "x-routelens-model" not in resp.headers
        message = body["error"]["message"]
        assert "every instance of m refused by its breaker: a open, b open" in message, message
        assert "None" not in message
        assert trace.mode is RoutingMode.FAIL_OPEN and trace.attempts == []
        assert steps(trace, "skip/") == [
            ("skip/a", "a not sent: refused by its instance breaker a open", [], ["a"]),
            ("skip/b", "b not sent: refused by its instance breaker b open", [], ["b"])]
        assert all(s.kind is StepKind.FALLBACK for s in trace.decision_trace if s.step.startswith("skip/"))

    asyncio.run(run())


def test_a_half_open_trial_sent_ahead_of_the_pick_is_recorded_and_the_header_names_it() -> None:
    async def run() -> None:
        ups = {"a": Upstream(0.5), "b": Upstream(0.1)}  # b has the freer KV cache: the pick
        async with gateway(ups) as (client, gw, hooks):
            move(gw, "a", "half_open")
            resp = await client.post("/v1/chat/completions", json=CHAT)
            trace = trace_of(hooks, resp)
        assert resp.status == 200 and ups["a"].calls == 1 and ups["b"].calls == 0
        pick = next(s for s in trace.decision_trace if s.step == "pick")
        assert pick.instances == ["b"] and trace.selected_instance == "a"  # picked b, a served
        assert [(x.instance, x.status) for x in trace.attempts] == [("a", AttemptStatus.OK)]
        assert resp.headers["x-routelens-instance"] == "a"  # the instance that answered
        why = "a sent first ahead of b: a trial of its instance breaker a half-open"
        assert steps(trace, "trial/") == [("trial/a", why, ["a"], [])]
        names = [s.step for s in trace.decision_trace]
        assert names.index("trial/a") < names.index("attempt/a")
        assert trace.fallback_triggered and trace.fallback_reason == why

    asyncio.run(run())


def test_a_first_choice_refused_by_its_breaker_then_another_serving_is_recorded_in_order() -> None:
    async def run() -> None:
        ups = {"a": Upstream(0.1), "b": Upstream(0.95)}  # b latched out by its KV cache, a by its breaker
        async with gateway(ups, sections=LATCH_AT_ONCE) as (client, gw, hooks):
            move(gw, "a", "open")
            resp = await client.post("/v1/chat/completions", json=CHAT)
            trace = trace_of(hooks, resp)
        assert resp.status == 200 and ups["a"].calls == 0 and ups["b"].calls == 1
        pick = next(s for s in trace.decision_trace if s.step == "pick")
        assert trace.mode is RoutingMode.FAIL_OPEN and pick.instances == ["a"] and trace.selected_instance == "b"
        assert resp.headers["x-routelens-instance"] == "b"
        assert [s.step for s in trace.decision_trace if s.kind in (StepKind.FALLBACK, StepKind.ATTEMPT)][-2:] == [
            "skip/a", "attempt/b"]

    asyncio.run(run())


def test_a_throttled_request_keeps_its_rule() -> None:
    throttled = ("routing_matrix:\n"
                 "  - {rule_name: bursty, condition: \"prompt_contains('burst')\", primary_target: m,\n"
                 "     throttle_config: {max_rps: 0.5, burst_window: 2s, overflow: reject}}\n")

    async def run() -> None:
        ups = {"a": Upstream(0.1), "b": Upstream(0.2)}
        async with gateway(ups, policy=throttled) as (client, _, hooks):
            chat = {"model": "auto", "messages": [{"role": "user", "content": "burst"}]}
            first = await client.post("/v1/chat/completions", json=chat)
            second = await client.post("/v1/chat/completions", json=chat)
            served, refused = trace_of(hooks, first), trace_of(hooks, second)
        assert (first.status, second.status) == (200, 429)
        assert refused.policy is not None and refused.policy.throttled == "reject"
        assert refused.rule == refused.policy.rule == served.rule == "bursty"

    asyncio.run(run())


def test_failing_open_never_sends_a_prompt_to_an_instance_too_small_for_it() -> None:
    async def run() -> None:
        # Both latched out by their KV cache: fail open. small-b has the freer cache but a 1,024-token window.
        ups = {"big-a": Upstream(0.97), "small-b": Upstream(0.90, 400, OVERFLOW)}
        instances: dict[str, dict[str, Any]] = {"big-a": {"context_window": 32768},
                                                "small-b": {"model": "s", "context_window": 1024}}
        async with gateway(ups, instances, sections=LATCH_AT_ONCE) as (client, _, hooks):
            resp = await client.post("/v1/chat/completions", json=LONG)
            trace = trace_of(hooks, resp)
        assert trace.features.est_input_tokens > 1024
        assert resp.status == 200 and ups["small-b"].calls == 0 and ups["big-a"].calls == 1
        assert trace.mode is RoutingMode.FAIL_OPEN and [x.instance for x in trace.attempts] == ["big-a"]
        small = next(c for c in trace.candidates if c.instance == "small-b")
        assert small.rank is None and small.total is None
        assert any(v.constraint == "context-window" for v in small.violations)
        fail_open = next(s for s in trace.decision_trace if s.kind is StepKind.FALLBACK and "failing open" in s.reason)
        assert fail_open.instances == ["big-a"] and fail_open.rejected == ["small-b"]

    asyncio.run(run())


def test_failing_open_with_no_window_that_holds_the_request_is_a_400() -> None:
    # The rule's feature leaves only small-b: the gateway's own check (over model s's instances) passes,
    # and failing open would send the prompt to an instance that cannot hold it.
    policy = ('routing_dsl: |\n'
              '  IF query_length > 1000 THEN route_to("s") WITH compression="flash-attn"\n'
              '  ELSE route_to("s")\n')

    async def run() -> None:
        ups = {"big-a": Upstream(0.97), "small-b": Upstream(0.90, 400, OVERFLOW)}
        instances = {"big-a": {"model": "s", "context_window": 32768},
                     "small-b": {"model": "s", "context_window": 1024, "features": ["flash-attn"]}}
        async with gateway(ups, instances, sections=LATCH_AT_ONCE, policy=policy) as (client, _, hooks):
            resp = await client.post("/v1/chat/completions", json=LONG)
            body = await resp.json()
            trace = trace_of(hooks, resp)
        assert resp.status == 400 and ups["small-b"].calls == ups["big-a"].calls == 0
        assert (body["error"]["code"], body["error"]["param"]) == ("context_length_exceeded", "messages")
        assert body["error"]["message"].startswith("This model's maximum context length is 1024 tokens")
        assert "x-routelens-instance" not in resp.headers
        assert trace.rule == "clause-1" and trace.attempts == [] and trace.selected_instance is None
        assert (trace.outcome.http_status, trace.outcome.error_class) == (400, "context_length_exceeded")
        assert "no candidate's context window holds the request" in (trace.fallback_reason or "")

    asyncio.run(run())
