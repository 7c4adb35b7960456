"""The gateway's breakers in-process: 3 timeouts open an instance before any scrape, trials close it, operators too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas.common import AttemptStatus
from schemas.config import RouteLensConfig
from tests.router_core.gateway.gateway_kit import CHAT, trace_of
from tests.router_core.gateway.test_forwarding import KV, MemoryHooks, reply, upstream


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Flaky:
    """A handler that hangs while ``hang`` is set, else answers 200; ``seen``: the request ids that reached it."""

    def __init__(self) -> None:
        self.hang = True
        self.seen: list[str | None] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(request.headers.get("X-Request-Id"))
        if self.hang:
            await asyncio.sleep(10)
        return await reply(200)(request)


@asynccontextmanager
async def gateway(a: Any, clock: Clock, gateway_cfg: dict[str, Any] | None = None, b: Flaky | None = None,
                  **resilience: Any) -> AsyncIterator[tuple[TestClient[Any, Any], Gateway, MemoryHooks]]:
    """A gateway on instances a (ranked first: ``a.handle``) and b (``b.handle``; None: answers 200)."""
    async with AsyncExitStack() as stack:
        servers = {"a": TestServer(upstream(a.handle, KV["a"])),
                   "b": TestServer(upstream(reply(200) if b is None else b.handle, KV["b"]))}
        for server in servers.values():
            await server.start_server()
            stack.push_async_callback(server.close)
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/")}
                                    for iid, s in servers.items()]},
            "gateway": {"max_attempts": 2, "upstream_timeout_s": 0.2, **(gateway_cfg or {})},
            "scrape": {"interval_s": 60},
            "resilience": {"breakers": {"instance": {"open_s": 5, "close_after": 1, "stall_after_s": None}},
                           **resilience},
        })
        hooks = MemoryHooks()
        ids = iter(f"req-{i}" for i in range(100))
        gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids), perf=clock)
        client = await stack.enter_async_context(TestClient(TestServer(gw.build_app())))
        yield client, gw, hooks


# Only a hang races a short timer here: the three that open a are streams cut at their first byte
# (0.2 s), tried on a alone; every answer the tests need (b's, a trial's, a's after an operator's
# close) is a whole answer with upstream_timeout_s. With one 0.2 s timeout for all, a loaded machine's
# stall (a full garbage collection took 0.3-0.95 s beside two busy processes) failed the tests: a
# timeout fired before its request reached a (`a.calls == 3` read 2), or b's, the trial's or the
# closed a's answer came back too late (the trial then reopens the breaker, rightly; a's attempt after
# the close timed out and b served).
STALL_PROOF = {"max_attempts": 1, "first_byte_timeout_s": 0.2, "upstream_timeout_s": 30}


async def open_a(client: TestClient[Any, Any], hooks: MemoryHooks) -> list[str]:
    """Three streams to a (a gateway with :data:`STALL_PROOF`) whose first byte times out: a's breaker opens.

    Returns their request ids (a stall may fire a timeout before its request reached a).
    """
    opening = []
    for _ in range(3):
        got = await client.post("/v1/chat/completions", json={**CHAT, "stream": True})
        await got.read()
        opening.append(got.headers["x-request-id"])
        attempts = trace_of(hooks, got.headers).attempts
        assert [(x.instance, x.status, x.error_class) for x in attempts] == [
            ("a", AttemptStatus.TIMEOUT, "first_byte_timeout")]
    return opening


def test_three_timeouts_open_the_instance_before_any_scrape_then_a_trial_closes_it() -> None:
    asyncio.run(_test_three_timeouts_open_the_instance_before_any_scrape_then_a_trial_closes_it())


async def _test_three_timeouts_open_the_instance_before_any_scrape_then_a_trial_closes_it() -> None:
    clock, a = Clock(), Flaky()
    async with gateway(a, clock, STALL_PROOF) as (client, gw, hooks):
        rounds = gw.scrape_metrics.rounds._value.get()
        opening = await open_a(client, hooks)
        got = await client.post("/v1/chat/completions", json=CHAT)
        trace = trace_of(hooks, got.headers)
        assert [(x.instance, x.status) for x in trace.attempts] == [("b", AttemptStatus.OK)]  # no failed attempt
        a_eval = next(c for c in trace.candidates if c.instance == "a")
        assert [v.metric for v in a_eval.violations] == ["breaker_instance"]
        assert "3 consecutive timeout errors" in a_eval.violations[0].reason
        # A timeout may fire before its request reached a (a stall): a saw at most the three, never this one.
        assert set(a.seen) <= set(opening) and got.headers["x-request-id"] not in a.seen
        assert gw.scrape_metrics.rounds._value.get() == rounds  # no scrape in between
        state = await (await client.get("/v1/router/state")).json()
        row = next(r for r in state["breakers"]["breakers"] if r["scope"] == "instance" and r["name"] == "a")
        assert row["state"] == "open" and "timeout" in row["reason"]
        assert [e["message"].split(": ")[1].split(" (")[0] for e in state["breakers"]["events"]] == ["closed -> open"]
        text = await (await client.get("/metrics")).text()
        assert 'routelens_breaker_state{name="a",scope="instance"} 2.0' in text
        # open_s later: half-open, the next request to a is a trial; it passes, the breaker closes
        a.hang = False
        clock.t += 5
        breaker = gw.breakers.get("instance", "a")
        assert breaker is not None
        for _ in range(200):  # the hub's sweep loop (every 0.1 s of the event loop's time) moves it
            if breaker.state.label == "half_open":
                break
            await asyncio.sleep(0.05)
        assert breaker.state.label == "half_open"
        got = await client.post("/v1/chat/completions", json=CHAT)
        assert [(x.instance, x.status) for x in trace_of(hooks, got.headers).attempts] == [("a", AttemptStatus.OK)]
        assert got.headers["x-request-id"] in a.seen and breaker.state.label == "closed"
        text = await (await client.get("/metrics")).text()
        assert 'routelens_breaker_state{name="a",scope="instance"} 0.0' in text


def test_an_operator_closes_a_breaker() -> None:
    asyncio.run(_test_an_operator_closes_a_breaker())


async def _test_an_operator_closes_a_breaker() -> None:
    clock, a = Clock(), Flaky()  # the clock stands still: open_s never passes, only the operator closes it
    async with gateway(a, clock, STALL_PROOF) as (client, gw, hooks):
        await open_a(client, hooks)
        breaker = gw.breakers.get("instance", "a")
        assert breaker is not None and breaker.state.label == "open"
        a.hang = False
        got = await client.post("/v1/router/breakers/instance/a/close?by=alice")
        assert got.status == 200 and (await got.json())["state"] == "closed"
        assert breaker.state.label == "closed"
        assert (await client.post("/v1/router/breakers/instance/zz/close")).status == 404
        got = await client.post("/v1/chat/completions", json=CHAT)
        assert [(x.instance, x.status) for x in trace_of(hooks, got.headers).attempts] == [("a", AttemptStatus.OK)]
        assert got.headers["x-request-id"] in a.seen
        state = await (await client.get("/v1/router/state")).json()
        assert "closed by an operator (alice)" in state["breakers"]["events"][-1]["message"]


def test_the_deadline_bounds_the_chain() -> None:
    asyncio.run(_test_the_deadline_bounds_the_chain())


# Both a and b hang: a's attempt ends at its own 0.2 s timeout, b's only by what is left of the 0.3 s
# deadline (``deadline_exceeded``; without the deadline it would be a 0.2 s ``timeout``). Whatever a
# stall does to the timers, a's attempt lasts at least 0.2 s, so b never has a whole attempt left: it
# gets the rest of the deadline, or, when a stall ran a's attempt past the deadline, no attempt at all.
# (The old test had b answer at once, so it passed without any deadline, and a stall failed it.)
async def _test_the_deadline_bounds_the_chain() -> None:
    a, b = Flaky(), Flaky()
    async with gateway(a, time.perf_counter, b=b, deadline_s=0.3) as (client, gw, hooks):  # type: ignore[arg-type]
        got = await client.post("/v1/chat/completions", json=CHAT)
        trace = trace_of(hooks, got.headers)
        first, *rest = trace.attempts
        assert got.status == 502 and (first.instance, first.status, first.error_class) == (
            "a", AttemptStatus.TIMEOUT, "timeout")
        if rest:  # the usual case: b got the 0.1 s left
            assert [(x.instance, x.status, x.error_class) for x in rest] == [
                ("b", AttemptStatus.TIMEOUT, "deadline_exceeded")]
        else:  # a stall ran a's attempt to the deadline: none was left for b
            assert first.start_ms is not None and first.start_ms + first.latency_ms >= 300
