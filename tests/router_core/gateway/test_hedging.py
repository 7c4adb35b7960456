"""Hedged requests: an attempt out past its expected latency gets a twin on the next instance; the first answer wins."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from schemas.common import AttemptStatus
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client, trace_of
from tests.router_core.gateway.test_forwarding import reply

HEDGE = {"resilience": {"hedging": {"min_delay_ms": 50, "max_delay_ms": 50}}}  # 50 ms whatever the p95


def hung(events: list[str]) -> Any:
    async def handler(_: web.Request) -> web.StreamResponse:
        events.append("sent")
        try:
            await asyncio.sleep(3600)  # accepts, never answers
        except asyncio.CancelledError:
            events.append("cancelled")  # the gateway hung up on it
            raise
        return web.Response()

    return handler


def test_a_hung_instance_costs_the_client_a_hedging_delay_not_a_timeout() -> None:
    events: list[str] = []

    async def main() -> None:
        async with gateway_client({"a": hung(events), "b": reply(200)}, sections=HEDGE) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT)
            assert resp.status == 200 and resp.headers["x-routelens-instance"] == "b"
            trace = trace_of(hooks, resp.headers)
            first, twin = trace.attempts
            assert (first.instance, first.status, first.error_class) == ("a", AttemptStatus.TIMEOUT, "hedged_out")
            assert (twin.instance, twin.status, twin.seq) == ("b", AttemptStatus.OK, 1)
            assert first.span_id != twin.span_id
            # when each was sent, after the trace's ts: the twin 50 ms into the first, which ran until the twin won
            assert first.start_ms is not None and twin.start_ms is not None
            assert twin.start_ms - first.start_ms >= 49.0 and twin.start_ms < first.start_ms + first.latency_ms
            for _ in range(100):  # the hung attempt's connection is closed: the instance sees it go
                if "cancelled" in events:
                    break
                await asyncio.sleep(0.02)
            assert events == ["sent", "cancelled"]

    asyncio.run(main())


def test_an_instance_that_answers_in_time_gets_no_twin() -> None:
    calls: dict[str, int] = {"a": 0, "b": 0}

    def counted(iid: str) -> Any:
        ok = reply(200)

        async def handler(request: web.Request) -> web.StreamResponse:
            calls[iid] += 1
            return await ok(request)

        return handler

    async def main() -> None:
        async with gateway_client({"a": counted("a"), "b": counted("b")}, sections=HEDGE) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT)
            assert resp.status == 200 and len(trace_of(hooks, resp.headers).attempts) == 1
            assert calls == {"a": 1, "b": 0}

    asyncio.run(main())


def test_hedging_off_waits_for_the_timeout_then_retries() -> None:
    events: list[str] = []
    off = {"resilience": {"hedging": {"enabled": False}}}

    async def main() -> None:
        async with gateway_client({"a": hung(events), "b": reply(200)}, gateway={"upstream_timeout_s": 0.3},
                                  sections=off) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT)
            first, second = trace_of(hooks, resp.headers).attempts
            assert (first.status, first.error_class, second.instance) == (AttemptStatus.TIMEOUT, "timeout", "b")

    asyncio.run(main())


def test_when_both_fail_both_are_in_the_trace_and_the_client_gets_the_error() -> None:
    async def main() -> None:
        async with gateway_client({"a": reply(500), "b": reply(503)}, sections=HEDGE) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT)
            assert resp.status == 502
            assert [a.http_status for a in trace_of(hooks, resp.headers).attempts] == [500, 503]

    asyncio.run(main())


def test_the_trace_and_its_feedback_name_the_instance_that_answered() -> None:
    events: list[str] = []

    async def main() -> None:
        async with gateway_client({"a": hung(events), "b": reply(200)}, sections=HEDGE) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT)
            trace = trace_of(hooks, resp.headers)
            assert trace.selected_instance == "b"  # decided for a, answered by b's twin: the trace says b
            verdict = {"request_id": trace.request_id, "correct": False, "expected_class": trace.intent or "chat"}
            answer = await client.post("/v1/feedback", json=verdict)
            body = await answer.json()
            assert answer.status == 202 and body["learned"]["instance"] == "b", body

    asyncio.run(main())
