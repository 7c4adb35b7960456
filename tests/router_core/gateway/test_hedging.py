"""Hedged requests: an attempt out past its expected latency gets a twin on the next instance; the first answer wins."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from schemas.common import AttemptStatus
from tests.polling import wait_until_async as until
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
            await until(lambda: "cancelled" in events)  # the hung attempt's connection is closed: the instance sees it
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


def test_an_answer_after_the_twin_went_out_wins_and_the_twin_is_hedged_out() -> None:
    events: list[str] = []

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.25)  # past the 50 ms delay: the twin is out by then
        return await reply(200)(request)

    async def main() -> None:
        async with gateway_client({"a": slow, "b": hung(events)}, sections=HEDGE) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT)
            assert resp.status == 200 and resp.headers["x-routelens-instance"] == "a"
            first, twin = trace_of(hooks, resp.headers).attempts
            assert (first.instance, first.status, first.seq) == ("a", AttemptStatus.OK, 0)
            assert (twin.instance, twin.status, twin.error_class) == ("b", AttemptStatus.TIMEOUT, "hedged_out")
            await until(lambda: "cancelled" in events)  # the twin's connection is closed: its instance sees it go
            assert events == ["sent", "cancelled"]

    asyncio.run(main())


def test_a_request_cancelled_mid_race_ends_both_attempts() -> None:
    from aiohttp.test_utils import TestServer

    from router_core.gateway.forward import Forwarder
    from router_core.state.inflight import InflightCounter
    from router_core.state.view import StateView
    from schemas.config import GatewaySettings
    from schemas.config.resilience import ResilienceSettings
    from schemas.fleet import InstanceSpec
    from tests.router_core.gateway.test_forwarding import KV, upstream

    seen: dict[str, list[str]] = {"a": [], "b": []}

    async def main() -> None:
        servers = {iid: TestServer(upstream(hung(seen[iid]), KV[iid])) for iid in seen}
        for server in servers.values():
            await server.start_server()
        specs = [InstanceSpec(id=iid, model="m", url=str(s.make_url("")).rstrip("/")) for iid, s in servers.items()]
        inflight = InflightCounter()
        forwarder = Forwarder(None, StateView(specs, clock=lambda: 0.0), GatewaySettings(), inflight=inflight,
                              resilience=ResilienceSettings.model_validate(HEDGE["resilience"]))
        try:
            task = asyncio.ensure_future(forwarder.forward(dict(CHAT), specs, "req-1", 2))
            await until(lambda: bool(seen["a"] and seen["b"]))  # both out: the first, then its twin 50 ms later
            assert inflight.count("a") == inflight.count("b") == 1
            task.cancel()  # the request goes away
            await asyncio.wait([task])
            assert task.cancelled()
            assert inflight.count("a") == inflight.count("b") == 0  # both attempts ended
            await until(lambda: all("cancelled" in ev for ev in seen.values()))
            assert seen == {"a": ["sent", "cancelled"], "b": ["sent", "cancelled"]}  # both connections closed
        finally:
            await forwarder.close()
            for server in servers.values():
                await server.close()

    asyncio.run(main())


def test_a_twin_started_in_the_turn_the_first_answered_is_hedged_out_not_raised_into_the_request() -> None:
    """The twin's timer fires in the turn of the event loop the first answers in, so it is cancelled before its
    first step would run. A surge drill lost such requests: ``CancelledError('hedged_out')`` out of the handler,
    no answer, no trace, and the twin's in-flight count never let go.
    """
    from router_core.gateway.hedge import HEDGED_OUT, race
    from router_core.resilience.fallbacks import Abort

    held: list[str] = []

    async def first() -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the twin's timer (0 s) fires between these two turns
        return "answer"

    def twin() -> Any:  # as Forwarder._attempt: counts itself in flight now, lets go in its coroutine
        held.append("in flight")

        async def exchange() -> str:
            try:
                await asyncio.sleep(3600)
                return "twin's answer"
            except asyncio.CancelledError as exc:
                if exc.args == (HEDGED_OUT,):
                    return "hedged out"
                raise
            finally:
                held.remove("in flight")

        return exchange()

    async def main() -> list[str]:
        return await race(first(), Abort(), 0.0, twin, lambda _: True)

    assert asyncio.run(main()) == ["answer", "hedged out"]
    assert held == []
