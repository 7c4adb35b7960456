"""Seed 003 §1: the router's own time against the upstream's, per answered request, on /metrics.

A real gateway over stub instances, its perf clock the real one plus a virtual offset: an instance
"takes" 2 s by moving the offset while it answers, a stream 3 s after its first byte, the trace's
storage 0.5 s after the answer. Each lands on the side it belongs to, whatever the real time was.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
from aiohttp import web

from router_core.metrics.routing_time import split_request_time
from schemas import AttemptStatus
from schemas.trace import Attempt, DecisionTrace
from tests.promtext import Samples, samples
from tests.router_core.gateway.gateway_kit import CHAT, Handler, served_gateway, sse
from tests.router_core.gateway.test_forwarding import OK_BODY

ROUTING = "routelens_gateway_routing_duration_seconds"
UPSTREAM = "routelens_gateway_upstream_duration_seconds"


class Clock:
    """``time.perf_counter()`` plus an offset the stubs move (virtual seconds)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset


def answering(clock: Clock, takes_s: float, status: int = 200) -> Handler:
    async def handler(_: web.Request) -> web.Response:
        clock.offset += takes_s
        return web.Response(status=status, body=orjson.dumps(OK_BODY), content_type="application/json")

    return handler


def streaming(clock: Clock, after_first_s: float) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "a"}}]}
        await resp.write(sse(chunk)[0])
        await asyncio.sleep(0.05)  # the gateway has the first byte
        clock.offset += after_first_s
        await resp.write(b"".join(sse(chunk, "[DONE]")))
        await resp.write_eof()
        return resp

    return handler


async def serve(handlers: dict[str, Handler], clock: Clock, *bodies: Any, storage_s: float = 0.0,
                ) -> tuple[Samples, list[int], float]:
    """Send ``bodies`` to a real gateway (its trace storage taking ``storage_s``); its /metrics after, and real time."""
    t0 = time.perf_counter()
    async with served_gateway(handlers, gateway={"max_attempts": 2, "upstream_timeout_s": 5.0},
                              perf=clock) as (client, hooks, _):
        store = hooks.emit

        def slow_emit(trace: DecisionTrace) -> bool:
            clock.offset += storage_s
            return store(trace)

        hooks.emit = slow_emit  # type: ignore[method-assign]
        statuses = []
        for body in bodies:
            resp = await client.post("/v1/chat/completions", data=body if isinstance(body, bytes) else None,
                                     json=None if isinstance(body, bytes) else body)
            await resp.read()
            statuses.append(resp.status)
        got = samples(await (await client.get("/metrics")).text())
    return got, statuses, time.perf_counter() - t0


def test_the_upstream_time_and_the_routers_own_are_told_apart() -> None:
    clock = Clock()
    got, statuses, real = asyncio.run(serve({"a": answering(clock, 2.0)}, clock, CHAT, CHAT, storage_s=0.5))
    assert statuses == [200, 200]
    assert got.value(UPSTREAM + "_count") == got.value(ROUTING + "_count") == 2
    assert 4.0 <= got.value(UPSTREAM + "_sum") < 4.0 + real
    assert 1.0 <= got.value(ROUTING + "_sum") < 1.0 + real  # storing the trace is on the request path
    assert got.value(UPSTREAM + "_bucket", le="2.5") == 2 and got.value(UPSTREAM + "_bucket", le="1.0") == 0


def test_a_retry_and_the_wait_before_it_are_the_upstreams() -> None:
    clock = Clock()
    got, statuses, real = asyncio.run(serve({"a": answering(clock, 1.0, 503), "b": answering(clock, 2.0)}, clock,
                                            CHAT))
    assert statuses == [200]
    assert 3.0 <= got.value(UPSTREAM + "_sum") < 3.0 + real and got.value(ROUTING + "_sum") < real


def test_a_stream_is_the_upstreams_to_its_end() -> None:
    clock = Clock()
    got, statuses, real = asyncio.run(serve({"a": streaming(clock, 3.0)}, clock, CHAT | {"stream": True}))
    assert statuses == [200]
    assert 3.0 <= got.value(UPSTREAM + "_sum") < 3.0 + real and got.value(ROUTING + "_sum") < real


def test_a_request_no_instance_answered_is_not_observed() -> None:
    clock = Clock()
    got, statuses, _ = asyncio.run(serve({"a": answering(clock, 1.0, 503), "b": answering(clock, 1.0, 503)}, clock,
                                         b"{not json", CHAT))
    assert statuses[0] == 400 and statuses[1] >= 500
    assert got.value(ROUTING + "_count") == got.value(UPSTREAM + "_count") == 0


def attempt(seq: int, start_ms: float | None, latency_ms: float, status: str = "ok") -> Attempt:
    return Attempt(seq=seq, instance=f"i{seq}", model="m", status=AttemptStatus(status), latency_ms=latency_ms,
                   start_ms=start_ms)


SPLITS = [
    # (attempts, elapsed, total, ttft) -> (routing s, upstream s)
    ("one", [attempt(0, 5.0, 200.0)], 215.0, 214.0, None, (0.015, 0.2)),
    ("retry-span", [attempt(0, 5.0, 100.0, "http_error"), attempt(1, 150.0, 200.0)], 360.0, 360.0, None,
     (0.015, 0.345)),
    ("hedge-overlap", [attempt(0, 5.0, 300.0), attempt(1, 105.0, 150.0)], 320.0, 320.0, None, (0.02, 0.3)),
    ("stream", [attempt(0, 10.0, 100.0)], 2112.0, 2110.0, 112.0, (0.014, 2.098)),
    ("no-start", [attempt(0, None, 100.0, "timeout"), attempt(1, None, 200.0)], 310.0, 310.0, None, (0.01, 0.3)),
    ("clamped", [attempt(0, 0.0, 50.0)], 40.0, 40.0, None, (0.0, 0.04)),
]


@pytest.mark.parametrize(("attempts", "elapsed", "total", "ttft", "expected"), [c[1:] for c in SPLITS],
                         ids=[c[0] for c in SPLITS])
def test_the_split(attempts: list[Attempt], elapsed: float, total: float, ttft: float | None,
                   expected: tuple[float, float]) -> None:
    got = split_request_time(attempts, elapsed, total, ttft)
    assert got == pytest.approx(expected)


def test_nothing_sent_nothing_split() -> None:
    assert split_request_time([], 10.0, 10.0, None) is None
