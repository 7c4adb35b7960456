"""A hedge race is not a fallback, whichever attempt won; a failed attempt the next one replaced is.

The audit: hedged requests were recorded ``fallback: true`` ("attempt on X failed: None") and
inflated every fallback figure. The definition is in :mod:`router_core.decide.recorder`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from schemas.common import AttemptStatus, StepKind
from schemas.trace import DecisionTrace
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client, trace_of
from tests.router_core.gateway.test_forwarding import reply
from tests.router_core.gateway.test_hedging import HEDGE, hung


def after(seconds: float, status: int) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)  # past the 50 ms hedging delay: the twin is out by then
        return await reply(status)(request)

    return handler


async def traced(handlers: dict[str, Any]) -> tuple[int, DecisionTrace]:
    async with gateway_client(handlers, sections=HEDGE) as (client, hooks):
        resp = await client.post("/v1/chat/completions", json=CHAT)
        return resp.status, trace_of(hooks, resp.headers)


def fallback_steps(trace: DecisionTrace) -> list[str]:
    return [s.reason for s in trace.decision_trace if s.kind is StepKind.FALLBACK]


def test_a_race_the_first_attempt_won_is_not_a_fallback() -> None:
    status, trace = asyncio.run(traced({"a": after(0.25, 200), "b": hung([])}))
    first, twin = trace.attempts
    assert (status, first.instance, first.status) == (200, "a", AttemptStatus.OK)
    assert (twin.instance, twin.error_class) == ("b", "hedged_out")
    assert (trace.fallback_triggered, trace.fallback_reason, fallback_steps(trace)) == (False, None, [])
    assert trace.selected_instance == "a"


def test_a_race_the_twin_won_is_a_hedge_not_a_fallback() -> None:
    status, trace = asyncio.run(traced({"a": hung([]), "b": reply(200)}))
    first, twin = trace.attempts
    assert (status, twin.instance, twin.status) == (200, "b", AttemptStatus.OK)
    assert (first.instance, first.error_class) == ("a", "hedged_out")  # the hedge's mark: the attempt it outran
    assert (trace.fallback_triggered, trace.fallback_reason, fallback_steps(trace)) == (False, None, [])
    assert trace.selected_instance == "b"


def test_a_failure_then_an_answer_elsewhere_is_a_fallback_naming_the_error() -> None:
    status, trace = asyncio.run(traced({"a": reply(503), "b": reply(200)}))  # a fails before any twin goes out
    assert status == 200 and [(a.instance, a.http_status) for a in trace.attempts] == [("a", 503), ("b", 200)]
    assert (trace.fallback_triggered, trace.fallback_reason) == (True, "attempt on a failed: HTTP 503")
    assert fallback_steps(trace) == ["retrying on b"]


def test_a_first_attempt_that_fails_while_its_twin_is_out_is_a_fallback() -> None:
    """The twin went out as a hedge, but the first attempt then failed for real: the twin replaced it."""
    status, trace = asyncio.run(traced({"a": after(0.2, 503), "b": after(0.5, 200)}))
    first, twin = trace.attempts
    assert (status, first.http_status, first.error_class, twin.status) == (200, 503, "HTTP 503", AttemptStatus.OK)
    assert (trace.fallback_triggered, trace.fallback_reason) == (True, "attempt on a failed: HTTP 503")
    assert trace.selected_instance == "b"
