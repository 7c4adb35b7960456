"""``POST /v1/router/decide`` decides as the chat route does (budgets, modes, affinity, 400s) and changes nothing."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.policy_gate import PolicyGate
from router_core.rules.load import compile_policy
from schemas import RoutingMode
from schemas.config import RouteLensConfig
from tests.router_core.decide.test_attachments import DOCX
from tests.router_core.gateway.test_attachments import with_file
from tests.router_core.gateway.test_forwarding import KV, MemoryHooks, reply, upstream

NOON = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)  # budget windows are read on the wall clock: a fixed one
CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}
Client = TestClient[Any, Any]


@asynccontextmanager
async def gateway(sections: dict[str, Any], policy: str | None = None,
                  ) -> AsyncIterator[tuple[Client, MemoryHooks, Gateway]]:
    """A gateway over a and b (model m; a less loaded, so ranked first) with ``sections`` and a policy's text."""
    async with AsyncExitStack() as stack:
        servers = {iid: TestServer(upstream(reply(200), KV[iid])) for iid in ("a", "b")}
        for server in servers.values():
            await server.start_server()
            stack.push_async_callback(server.close)
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/")}
                                    for iid, s in servers.items()]},
            "gateway": {"max_attempts": 2, "upstream_timeout_s": 5.0}, "scrape": {"interval_s": 60},
            **sections,
        })
        hooks = MemoryHooks()
        ids = iter(f"req-{i}" for i in range(100))
        gate = None if policy is None else PolicyGate(config, compile_policy(policy, "policy.yaml", config))
        gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids), wall=lambda: NOON, policy=gate)
        client = await stack.enter_async_context(TestClient(TestServer(gw.build_app())))
        yield client, hooks, gw


async def dry_run(client: Client, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    resp = await client.post("/v1/router/decide", json=body, headers=headers or {})
    assert resp.status == 200, await resp.text()
    out: dict[str, Any] = await resp.json()
    return out


def steps(out: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [s for s in out["trace"]["decision_trace"] if s["step"] == name]


def test_a_spent_budget_stops_the_models_in_a_dry_run_as_in_chat_and_the_dry_run_spends_nothing() -> None:
    async def run() -> None:
        budgets = {"bands": [{"name": "all-day", "hours": [[0, 24]], "max_spend": 1.0}]}  # every model governed
        async with gateway({"economics": {"budgets": budgets}}) as (client, hooks, gw):
            gw.budgets.record("m", 5.0, NOON)
            spent = gw.budgets.state(NOON)
            out = await dry_run(client, CHAT)
            assert out["decision"]["mode"] == "fail_open"
            for cand in out["trace"]["candidates"]:
                assert not cand["feasible"] and [v["constraint"] for v in cand["violations"]] == ["budget"]
            assert gw.budgets.state(NOON) == spent and hooks.traces == {}  # nothing counted, nothing stored
            resp = await client.post("/v1/chat/completions", json=CHAT)
            trace = hooks.traces[resp.headers["x-request-id"]]
            assert trace.mode is RoutingMode.FAIL_OPEN
            assert [v.constraint for c in trace.candidates for v in c.violations] == ["budget", "budget"]

    asyncio.run(run())


def test_an_attachment_no_model_accepts_is_the_chat_routes_400_and_so_is_a_broken_contract() -> None:
    async def run() -> None:
        word = with_file(base64.b64encode(DOCX).decode(), "contract.pdf")
        too_hot = {**CHAT, "temperature": 7}
        async with gateway({"routing": {"attachments": {"accept": {"m": ["pdf", "png"]}}}}) as (client, _, _gw):
            for body, code in ((word, "unsupported_attachment_type"), (too_hot, "invalid_request")):
                chat = await client.post("/v1/chat/completions", json=body)
                dry = await client.post("/v1/router/decide", json=body)
                assert (dry.status, chat.status) == (400, 400)
                error = (await dry.json())["error"]
                assert error == (await chat.json())["error"] and error["code"] == code
            sent = "routing_matrix:\n  - {rule_name: all-m, primary_target: m}\n"
            wrapped = await client.post("/v1/router/decide", json={"request": word, "policy": sent})
            assert wrapped.status == 400 and "no model here accepts docx" in (await wrapped.json())["error"]["message"]

    asyncio.run(run())


def test_a_dry_run_reads_the_sessions_binding_and_binds_nothing() -> None:
    async def run() -> None:
        async with gateway({"economics": {"affinity": {"header": "x-ticket-id"}}}) as (client, _, gw):
            await gw.shared.rebind("affinity:T-1", "b", 60)  # a bound session, on the instance ranked second
            out = await dry_run(client, CHAT, {"x-ticket-id": "T-1"})
            assert out["decision"]["selected_instance"] == "b"
            assert [s["reason"] for s in steps(out, "affinity")] == ["session kept on b"]
            out = await dry_run(client, CHAT, {"x-ticket-id": "T-2"})  # a new session: where it would be placed
            (step,) = steps(out, "affinity")
            assert step["reason"] == f"session kept on {out['decision']['selected_instance']}"
            assert await gw.shared.bind("affinity:T-2", "nowhere", 60) == "nowhere"  # it was not bound

    asyncio.run(run())


def test_a_dry_run_shows_the_router_mode_and_takes_no_round_robin_turn_or_throttle_token() -> None:
    one_token = ('routing_matrix:\n  - {rule_name: all, primary_target: m,\n'
                 '     throttle_config: {max_rps: 0.5, burst_window: 2s, overflow: reject}}\n')

    async def run() -> None:
        async with gateway({}, policy=one_token) as (client, hooks, gw):
            gw.router_modes.is_static = True  # as slow decisions would have put it
            turn = gw.router_modes.seq + 1
            for _ in range(3):
                out = await dry_run(client, CHAT)
                assert out["decision"]["mode"] == "static" and out["decision"]["rule"] == "all"
                assert steps(out, "pick")[0]["reason"].endswith(f"turn {turn}")
            assert gw.router_modes.seq == turn - 1 and hooks.traces == {}
            resp = await client.post("/v1/chat/completions", json=CHAT)
            assert resp.status == 200  # the bucket's one token was still there
            trace = hooks.traces[resp.headers["x-request-id"]]
            assert trace.mode is RoutingMode.STATIC
            assert next(s for s in trace.decision_trace if s.step == "pick").reason.endswith(f"turn {turn}")

    asyncio.run(run())
