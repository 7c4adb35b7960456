"""The gateway under a routing policy: rules pick the model, throttles overflow, timeouts, degraded answers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from router_core.config_file import read_config
from router_core.gateway.policy_gate import PolicyGate
from router_core.rules.load import compile_policy
from schemas import AttemptStatus, OutcomeStatus, RoutingMode
from schemas.config import RouteLensConfig
from tests.router_core.gateway.gateway_kit import gateway_client, trace_of
from tests.router_core.gateway.test_forwarding import reply

TWO_MODELS = {"a": {"model": "m"}, "b": {"model": "n"}}


def chat(text: str, **kw: Any) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": text}], **kw}


def policy(*rules: str, extra: str = "") -> str:
    return "routing_matrix:\n" + "".join(rules) + extra


TO_N = '  - {rule_name: to-n, condition: "prompt_contains(\'to n\')", primary_target: n, fallback_chain: [m]}\n'


def test_a_matching_rule_routes_to_its_primary_and_the_trace_says_why() -> None:
    async def run() -> None:
        async with gateway_client({"a": reply(200), "b": reply(200)}, instances=TWO_MODELS,
                                  policy=policy(TO_N)) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=chat("please send this to n"))
            assert resp.status == 200 and resp.headers["x-routelens-instance"] == "b"
            trace = trace_of(hooks, resp.headers)
            assert trace.rule == "to-n" and trace.policy is not None
            assert (trace.policy.rule, trace.policy.target, trace.policy.chain, trace.policy.chain_used) == (
                "to-n", "n", ["m"], ["n"])
            assert trace.policy.tried[0].detail == ["prompt_contains('to n'): true"]
            other = await client.post("/v1/chat/completions", json=chat("hello"))
            trace = trace_of(hooks, other.headers)
            assert trace.rule == "auto" and trace.policy is not None and trace.policy.rule is None
            named = await client.post("/v1/chat/completions", json=chat("to n", model="m"))
            assert named.headers["x-routelens-instance"] == "a"  # a named model is not re-routed by rules
            assert trace_of(hooks, named.headers).policy is None

    asyncio.run(run())


def test_a_throttled_rule_answers_429_with_retry_after_and_traces_it() -> None:
    throttled = ('  - {rule_name: to-n, condition: "prompt_contains(\'to n\')", primary_target: n,\n'
                 '     throttle_config: {max_rps: 0.5, burst_window: 2s, overflow: reject}}\n')

    async def run() -> None:
        async with gateway_client({"a": reply(200), "b": reply(200)}, instances=TWO_MODELS,
                                  policy=policy(throttled)) as (client, hooks):
            first = await client.post("/v1/chat/completions", json=chat("to n"))
            second = await client.post("/v1/chat/completions", json=chat("to n"))
            assert first.status == 200 and second.status == 429
            assert int(second.headers["Retry-After"]) >= 1
            body = await second.json()
            assert body["error"]["type"] == "rate_limit_error" and body["error"]["code"] == "rate_limit_exceeded"
            trace = trace_of(hooks, second.headers)
            assert trace.outcome.http_status == 429 and trace.policy is not None
            assert trace.policy.throttled == "reject" and trace.attempts == []
            unthrottled = await client.post("/v1/chat/completions", json=chat("hello"))
            assert unthrottled.status == 200  # other rules' requests pass

    asyncio.run(run())


def test_throttle_overflow_goes_down_the_chain() -> None:
    chained = ('  - {rule_name: to-n, condition: "prompt_contains(\'to n\')", primary_target: n, fallback_chain: [m],\n'
               '     throttle_config: {max_rps: 0.5, burst_window: 2s}}\n')

    async def run() -> None:
        async with gateway_client({"a": reply(200), "b": reply(200)}, instances=TWO_MODELS,
                                  policy=policy(chained)) as (client, hooks):
            served = [(await client.post("/v1/chat/completions", json=chat("to n"))).headers for _ in range(2)]
            assert [h["x-routelens-instance"] for h in served] == ["b", "a"]
            trace = trace_of(hooks, served[1])
            assert trace.policy is not None and trace.policy.throttled == "chain" and trace.policy.chain_used == ["m"]

    asyncio.run(run())


def test_the_rule_timeout_applies_per_attempt_and_the_backoff_between_them() -> None:
    async def hang(_: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response()

    timed = ('  - {rule_name: quick, condition: "input_length >= 0", primary_target: m, fallback_chain: [n],\n'
             '     timeout_policy: {initial_timeout: 200ms, retry_backoff: 100ms}}\n')

    async def run() -> None:
        async with gateway_client({"a": hang, "b": reply(200)}, instances=TWO_MODELS,
                                  policy=policy(timed)) as (client, hooks):
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            resp = await client.post("/v1/chat/completions", json=chat("hi"))
            took = loop.time() - t0
            assert resp.status == 200 and resp.headers["x-routelens-instance"] == "b"
            trace = trace_of(hooks, resp.headers)
            assert [a.status for a in trace.attempts] == [AttemptStatus.TIMEOUT, AttemptStatus.OK]
            assert 190 <= trace.attempts[0].latency_ms < 1000 and 0.3 <= took < 2.0

    asyncio.run(run())


def test_when_every_attempt_fails_the_chain_ends_in_its_canned_answer() -> None:
    canned = '  - {rule_name: all, primary_target: m, fallback_chain: [n, rules]}\n'
    extra = "degraded_targets:\n  rules: {canned: \"try again later\"}\n"

    async def run() -> None:
        async with gateway_client({"a": reply(503), "b": reply(503)}, instances=TWO_MODELS,
                                  policy=policy(canned, extra=extra)) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=chat("hi"))
            assert resp.status == 200
            body = await resp.json()
            assert body["choices"][0]["message"]["content"] == "try again later" and body["model"] == "rules"
            trace = trace_of(hooks, resp.headers)
            assert trace.mode is RoutingMode.RULES and trace.outcome.status is OutcomeStatus.OK
            assert trace.policy is not None and trace.policy.chain_used == ["m", "n", "rules"]
            stream = await client.post("/v1/chat/completions", json=chat("hi", stream=True))
            raw = await stream.read()
            assert raw.endswith(b"data: [DONE]\n\n")
            chunk = orjson.loads(raw.split(b"\n\n")[0][len(b"data: "):])
            assert chunk["object"] == "chat.completion.chunk"
            assert chunk["choices"][0]["delta"]["content"] == "try again later"

    asyncio.run(run())


def test_a_policy_file_that_stops_compiling_keeps_the_last_good_rules(tmp_path: Path) -> None:
    (tmp_path / "routelens.yaml").write_text(
        "fleet: {instances: [{id: a, model: m, url: 'http://127.0.0.1:1'}, {id: b, model: n, url: 'http://127.0.0.1:2'}]}\n"
        "routing: {policy: p.yaml}\n", encoding="utf-8")  # the policy beside the config, named relative to it
    path = tmp_path / "p.yaml"
    path.write_text(policy(TO_N), encoding="utf-8")
    config = read_config(tmp_path / "routelens.yaml")
    gate = PolicyGate.load(config)
    assert gate.rules is not None and [r.name for r in gate.rules.rules] == ["to-n"]
    path.write_text(policy('  - {rule_name: broken, primary_target: gpt-9}\n'), encoding="utf-8")
    assert not gate.reload()
    assert [r.name for r in gate.rules.rules] == ["to-n"]
    assert gate.last_error is not None and "p.yaml:2:" in gate.last_error and "gpt-9" in gate.last_error
    path.write_text(policy(TO_N.replace("to-n", "to-n-v2")), encoding="utf-8")
    assert gate.reload() and [r.name for r in gate.rules.rules] == ["to-n-v2"] and gate.last_error is None
    assert compile_policy(policy(TO_N), "x.yaml", config).hash == compile_policy(policy(TO_N), "y.yaml", config).hash


def test_a_dry_run_decides_without_forwarding_or_storing_for_the_live_or_a_sent_policy() -> None:
    seen: list[str] = []

    async def counting(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(body=orjson.dumps({"choices": []}), content_type="application/json")

    async def run() -> None:
        async with gateway_client({"a": counting, "b": counting}, instances=TWO_MODELS,
                                  policy=policy(TO_N)) as (client, hooks):
            resp = await client.post("/v1/router/decide", json=chat("send this to n"))
            assert resp.status == 200
            out = await resp.json()
            assert out["decision"]["rule"] == "to-n" and out["decision"]["selected_instance"] == "b"
            assert out["trace"]["policy"]["rule"] == "to-n" and out["trace"]["query_hash"].startswith("sha256:")
            assert "send this" not in orjson.dumps(out).decode()  # the query only as its hash
            other = policy('  - {rule_name: all-m, primary_target: m}\n')
            resp = await client.post("/v1/router/decide", json={"request": chat("send this to n"), "policy": other})
            assert (await resp.json())["decision"]["selected_instance"] == "a"
            dsl = 'IF query_length >= 0 THEN route_to("n")'
            resp = await client.post("/v1/router/decide",
                                     json={"request": chat("x"), "policy": dsl, "policy_format": "dsl"})
            assert (await resp.json())["decision"]["rule"] == "clause-1"
            bad = await client.post("/v1/router/decide",
                                    json={"request": chat("x"), "policy": policy("  - {rule_name: a, colour: 1}\n")})
            error = (await bad.json())["error"]
            assert bad.status == 400 and error["code"] == "invalid_policy"
            assert error["message"].startswith("<request>.yaml:2:")
            assert seen == [] and hooks.traces == {}  # nothing forwarded, nothing stored
            state = await (await client.get("/v1/router/state")).json()
            assert state["policy"]["rules"][0]["name"] == "to-n" and state["policy"]["reload_error"] is None

    asyncio.run(run())


def test_the_rules_read_the_hour_in_the_policy_files_own_timezone() -> None:
    """The file's ``timezone`` wins over ``routing.timezone``, as ``policy test`` reads it (09:30 in Shanghai)."""
    from datetime import UTC, datetime

    from router_core.decide.analysis import analyse_request

    config = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": iid, "url": f"http://127.0.0.1:{n + 1}", **spec}
                                for n, (iid, spec) in enumerate(TWO_MODELS.items())]},
        "routing": {"timezone": "UTC"},
    })
    at_nine = '  - {rule_name: at-nine, condition: "request_time.hour in [9]", primary_target: n}\n'
    now = datetime(2026, 6, 1, 1, 30, tzinfo=UTC)
    analysis = analyse_request(chat("hello"))
    for zone, hour, rule in (("Asia/Shanghai", 9, "at-nine"), ("UTC", 1, None)):
        gate = PolicyGate(config, compile_policy(policy(at_nine, extra=f"timezone: {zone}\n"), "p.yaml", config))
        got = asyncio.run(gate.understand(analysis, chat("hello"), {}, now, dict))
        assert got.choice is not None and got.choice.local_hour == hour
        assert (got.choice.rule.name if got.choice.rule else None) == rule
