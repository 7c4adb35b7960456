"""W3C trace context through a real gateway: traceparent in, recorded in the trace, sent upstream per attempt."""

from __future__ import annotations

import asyncio
import random
from contextlib import AsyncExitStack
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.degraded import answer_from
from router_core.gateway.http1 import Http1Pool
from router_core.gateway.trace_context import TraceIds, parse_traceparent
from router_core.rules.ir import DegradedTarget
from schemas.config import RouteLensConfig
from schemas.sampling import ratio_keeps
from schemas.trace import DecisionTrace
from tests.router_core.gateway.test_forwarding import KV, OK_BODY, MemoryHooks, upstream

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}

CASES = [  # (header, parsed or None)
    (f"00-{TRACE}-{PARENT}-01", (TRACE, PARENT, "01")),
    (f"00-{TRACE}-{PARENT}-00", (TRACE, PARENT, "00")),
    (f"  00-{TRACE}-{PARENT}-01 ", (TRACE, PARENT, "01")),  # surrounding blanks are not part of it
    (f"01-{TRACE}-{PARENT}-01-what-comes-later", (TRACE, PARENT, "01")),  # a later version may add fields
    (f"00-{TRACE}-{PARENT}-01-extra", None),  # version 00 is exactly 55 characters
    (f"ff-{TRACE}-{PARENT}-01", None),  # version ff is invalid
    (f"00-{TRACE.upper()}-{PARENT}-01", None),  # upper-case hex
    (f"00-{'0' * 32}-{PARENT}-01", None),  # all-zero trace id
    (f"00-{TRACE}-{'0' * 16}-01", None),  # all-zero parent id
    (f"00-{TRACE[:-1]}-{PARENT}-01", None),  # short
    (f"00_{TRACE}_{PARENT}_01", None),  # wrong separators
    (f"00-{TRACE[:-1]}g-{PARENT}-01", None),  # not hex
    ("", None),
    (None, None),
]


@pytest.mark.parametrize(("header", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_parse_traceparent(header: str | None, expected: tuple[str, str, str] | None) -> None:
    assert parse_traceparent(header) == expected


def test_context_begins_a_trace_from_the_injected_source() -> None:
    ctx = TraceIds(random.Random(3).randbytes).context({"traceparent": "garbage", "tracestate": "k=v"})
    source = random.Random(3)
    assert (ctx.trace_id, ctx.span_id) == (source.randbytes(16).hex(), source.randbytes(8).hex())
    assert ctx.parent_id is None and ctx.tracestate is None and ctx.flags == "01"
    assert ctx.new_span_id() == source.randbytes(8).hex()


async def send(statuses: dict[str, int], headers: dict[str, str], body: bytes | None = None,
               otel: dict[str, Any] | None = None) -> tuple[int, DecisionTrace, dict[str, list[dict[str, str]]]]:
    """One request through a gateway over "a" (tried first) and "b" answering ``statuses``; what each received."""
    seen: dict[str, list[dict[str, str]]] = {iid: [] for iid in statuses}

    def handler(iid: str) -> Any:
        async def chat(request: web.Request) -> web.Response:
            seen[iid].append(dict(request.headers))
            return web.json_response(OK_BODY, status=statuses[iid])
        return chat

    async with AsyncExitStack() as stack:
        servers = {iid: TestServer(upstream(handler(iid), KV[iid])) for iid in statuses}
        for server in servers.values():
            await server.start_server()
            stack.push_async_callback(server.close)
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/")}
                                    for iid, s in servers.items()]},
            "gateway": {"max_attempts": 2, "upstream_timeout_s": 5.0}, "scrape": {"interval_s": 60},
            **({"otel": otel} if otel else {}),
        })
        hooks = MemoryHooks()
        gw = Gateway(config, build_router(config), hooks, random_bytes=random.Random(11).randbytes)
        client = await stack.enter_async_context(TestClient(TestServer(gw.build_app())))
        if body is None:
            resp = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
        else:
            resp = await client.post("/v1/chat/completions", data=body,
                                     headers={**headers, "Content-Type": "application/json"})
        return resp.status, hooks.traces[resp.headers["x-request-id"]], seen


def test_client_trace_is_joined_and_each_attempt_sends_its_own_span() -> None:
    status, trace, seen = asyncio.run(send({"a": 503, "b": 200}, {
        "traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "vendor=abc,other=1"}))
    assert status == 200
    assert trace.otel_trace_id == TRACE and trace.otel_parent_span_id == PARENT
    assert trace.otel_span_id is not None and trace.otel_span_id != PARENT
    assert [a.instance for a in trace.attempts] == ["a", "b"]
    spans = [a.span_id for a in trace.attempts]
    assert None not in spans and len({*spans, trace.otel_span_id}) == 3
    for attempt in trace.attempts:
        (headers,) = seen[attempt.instance]
        assert headers["traceparent"] == f"00-{TRACE}-{attempt.span_id}-01"
        assert headers["tracestate"] == "vendor=abc,other=1"
    # the JSON every store and exporter receives carries the ids
    assert trace.model_dump(mode="json")["otel_trace_id"] == TRACE
    assert trace.otel_trace_flags == "01"
    assert trace.otel_trace_state == "vendor=abc,other=1"  # the exported spans carry it (ingest.otel.spans)


def test_the_clients_tracestate_reaches_every_exported_span() -> None:
    from ingest.otel.spans import SpanBuilder

    _, trace, _ = asyncio.run(send({"a": 503, "b": 200}, {
        "traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "vendor=abc,other=1"}))
    spans = SpanBuilder().spans(trace.model_dump(mode="json"))
    assert len(spans) == 4 and {s.trace_state for s in spans} == {"vendor=abc,other=1"}


def test_a_client_unsampled_trace_keeps_its_flags_in_the_trace_and_upstream() -> None:
    # The exporter reads the flags back from the trace (ingest.otel.sink.wanted): 00 exports nothing.
    status, trace, seen = asyncio.run(send({"a": 200, "b": 200}, {"traceparent": f"00-{TRACE}-{PARENT}-00"}))
    assert status == 200 and trace.otel_trace_flags == "00"
    (attempt,) = trace.attempts
    assert seen["a"][0]["traceparent"] == f"00-{TRACE}-{attempt.span_id}-00"


@pytest.mark.parametrize("header", [None, f"00-{TRACE.upper()}-{PARENT}-01", "00-zz"])
def test_missing_or_invalid_traceparent_begins_a_trace(header: str | None) -> None:
    headers = {} if header is None else {"traceparent": header, "tracestate": "vendor=abc"}
    status, trace, seen = asyncio.run(send({"a": 200, "b": 200}, headers))
    assert status == 200
    source = random.Random(11)  # the gateway's seeded source: the trace id first, then the request span
    assert trace.otel_trace_id == source.randbytes(16).hex() != TRACE
    assert trace.otel_span_id == source.randbytes(8).hex()
    assert trace.otel_parent_span_id is None and trace.otel_trace_flags == "01"  # begun here: sampled
    (attempt,) = trace.attempts
    (sent,) = seen["a"]
    assert sent["traceparent"] == f"00-{trace.otel_trace_id}-{attempt.span_id}-01"
    assert "tracestate" not in sent  # a tracestate without a valid traceparent is not passed on
    assert trace.otel_trace_state is None


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0])
def test_a_trace_begun_here_is_flagged_as_the_exporters_ratio_keeps_it(ratio: float) -> None:
    """ParentBased instances record spans only for traces whose gateway spans are exported (the audit's 0.0 case
    sent 01, so instances exported spans whose parents never reached the backend)."""
    status, trace, seen = asyncio.run(send({"a": 200, "b": 200}, {}, otel={"enabled": True, "sample_ratio": ratio}))
    assert status == 200 and trace.otel_trace_id is not None
    flags = "01" if ratio_keeps(trace.otel_trace_id, ratio) else "00"
    assert trace.otel_trace_flags == flags and seen["a"][0]["traceparent"].endswith(f"-{flags}")
    assert flags == {0.0: "00", 1.0: "01"}.get(ratio, flags)
    ids = TraceIds(random.Random(2).randbytes, sample_ratio=0.5)
    kept = [ids.context({}) for _ in range(400)]
    assert all((c.flags == "01") is ratio_keeps(c.trace_id, 0.5) for c in kept)
    assert 150 < sum(c.flags == "01" for c in kept) < 250
    joined = ids.context({"traceparent": f"00-{TRACE}-{PARENT}-01"})  # a client's choice is kept whatever the ratio
    assert TraceIds(sample_ratio=0.0).context({"traceparent": f"00-{TRACE}-{PARENT}-01"}).flags == joined.flags == "01"


def test_refused_request_is_traced_with_its_trace_id() -> None:
    status, trace, seen = asyncio.run(send({"a": 200, "b": 200}, {"traceparent": f"00-{TRACE}-{PARENT}-01"},
                                           body=b"{not json"))
    assert status == 400 and seen == {"a": [], "b": []}
    assert trace.otel_trace_id == TRACE and trace.otel_parent_span_id == PARENT


def test_a_degraded_responder_gets_the_request_span_as_its_parent() -> None:
    # A rule chain's responder is called with no attempt span of its own: its spans hang under the request's.
    seen: list[Any] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.copy())  # case-insensitive
        return web.json_response(OK_BODY)

    async def go() -> int:
        app = web.Application()
        app.router.add_post("/answer", answer)
        async with TestServer(app) as server:
            ctx = TraceIds(random.Random(5).randbytes).context(
                {"traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "vendor=abc"})
            pool = Http1Pool()
            got = await answer_from(DegradedTarget("rules-engine", str(server.make_url("/answer")), None), dict(CHAT),
                                    "r-1", pool, timeout_s=5, connect_timeout_s=1, trace=ctx)
            await pool.close()
            assert (ctx.trace_id, ctx.parent_id) == (TRACE, PARENT)
            (headers,) = seen
            assert headers["traceparent"] == f"00-{TRACE}-{ctx.span_id}-01"
            assert headers["tracestate"] == "vendor=abc" and headers["X-Request-Id"] == "r-1"
            return got.status

    assert asyncio.run(go()) == 200
