"""The gateway against stub upstreams in-process: retries, pass-through, truncated streams, timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas import AttemptStatus, DecisionTrace, Feedback, OutcomeStatus
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.policy_record import PolicyRecord
from tests.router_core.gateway.quiet_hooks import QuietHooks

# Instances are ranked by the seed score: "a" (KV 10%) always before "b" (KV 20%).
KV = {"a": 0.1, "b": 0.2}
OK_BODY = {"id": "x", "object": "chat.completion", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class MemoryHooks(QuietHooks):
    """Keeps traces, feedback, scrape rounds and policies in memory (the rest as :class:`QuietHooks`)."""

    def __init__(self) -> None:
        self.traces: dict[str, DecisionTrace] = {}
        self.feedback: list[Feedback] = []
        self.rounds: list[list[InstanceSnapshot]] = []
        self.policies: dict[str, PolicyRecord] = {}  # the effective policies, by hash

    def emit(self, trace: DecisionTrace) -> bool:
        self.traces[trace.request_id] = trace
        return True

    def lookup(self, request_id: str) -> DecisionTrace | None:
        return self.traces.get(request_id)

    def record_feedback(self, feedback: Feedback) -> None:
        self.feedback.append(feedback)

    def has_stored_verdict(self, request_id: str) -> bool:
        return any(f.request_id == request_id for f in self.feedback)

    def record_snapshots(self, snapshots: list[InstanceSnapshot]) -> None:
        self.rounds.append(snapshots)

    def record_policy(self, record: PolicyRecord) -> None:
        self.policies[record.policy_hash] = record


def upstream(chat: Handler, kv: float) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=f'vllm:num_requests_waiting{{model_name="m"}} 0\nvllm:kv_cache_usage_perc {kv}\n')

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", chat)
    return app


def reply(status: int, body: Any = OK_BODY) -> Handler:
    async def handler(_: web.Request) -> web.Response:
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")

    return handler


async def run(handlers: dict[str, Handler], payload: dict[str, Any], timeout_s: float = 5.0,
              hooks: MemoryHooks | None = None) -> tuple[int, bytes, dict[str, str], DecisionTrace]:
    servers = {iid: TestServer(upstream(h, KV[iid])) for iid, h in handlers.items()}
    for server in servers.values():
        await server.start_server()
    config = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/")}
                                for iid, s in servers.items()]},
        "gateway": {"max_attempts": 2, "upstream_timeout_s": timeout_s},
        "scrape": {"interval_s": 60},
    })
    hooks = hooks or MemoryHooks()
    ids = iter(f"req-{i}" for i in range(100))
    gateway = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids))
    async with TestClient(TestServer(gateway.build_app())) as client:
        resp = await client.post("/v1/chat/completions", json=payload)
        body = await resp.read()
        headers = {k.lower(): v for k, v in resp.headers.items()}
    for server in servers.values():
        await server.close()
    return resp.status, body, headers, hooks.traces[headers["x-request-id"]]


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


def test_a_5xx_is_retried_on_the_next_ranked_instance() -> None:
    status, body, headers, trace = asyncio.run(run({"a": reply(503), "b": reply(503)}, CHAT))
    assert status == 502 and trace.outcome.status is OutcomeStatus.ERROR
    assert [a.status for a in trace.attempts] == [AttemptStatus.HTTP_ERROR] * 2
    assert trace.fallback_triggered and "HTTP 503" in (trace.fallback_reason or "")

    status, body, headers, trace = asyncio.run(run({"a": reply(503), "b": reply(200)}, CHAT))
    assert [(a.instance, a.http_status) for a in trace.attempts] == [("a", 503), ("b", 200)]
    assert trace.fallback_triggered
    assert status == 200 and headers["x-routelens-instance"] == "b" == trace.selected_instance
    assert orjson.loads(body) == OK_BODY  # passed through untouched
    assert (trace.outcome.prompt_tokens, trace.outcome.completion_tokens) == (3, 5)


def test_each_scrape_round_hands_over_its_snapshots_before_traces_refer_to_them() -> None:
    hooks = MemoryHooks()
    _, _, _, trace = asyncio.run(run({"a": reply(200), "b": reply(200)}, CHAT, hooks=hooks))
    assert len(hooks.rounds) == 1  # the first round, scraped before the gateway takes requests
    assert sorted(s.instance for s in hooks.rounds[0]) == ["a", "b"]
    assert {s.kv_cache_usage for s in hooks.rounds[0]} == {0.1, 0.2}
    # The very objects the trace points at: the emitter serialises each of them once, at scrape time.
    handed = {id(s) for s in hooks.rounds[0]}
    assert len(trace.candidates) == 2 and all(id(c.state) in handed for c in trace.candidates)


def test_a_client_error_upstream_is_passed_through_not_retried() -> None:
    error = {"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": None}}
    status, body, _, trace = asyncio.run(run({"a": reply(400, error), "b": reply(400, error)}, CHAT))
    assert status == 400 and orjson.loads(body) == error
    assert len(trace.attempts) == 1 and trace.outcome.error_class == "upstream_400"


def test_a_stream_cut_short_is_an_error_outcome() -> None:
    async def broken_stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices": []}\n\n')
        assert request.transport is not None
        request.transport.close()  # the instance dies mid-answer
        return resp

    status, body, _, trace = asyncio.run(run({"a": broken_stream, "b": broken_stream}, CHAT | {"stream": True}))
    assert status == 200 and body.startswith(b"data: ")
    assert trace.outcome.status is OutcomeStatus.ERROR
    assert (trace.outcome.error_class or "").startswith("stream_interrupted")
    assert trace.outcome.ttft_ms is not None


def test_a_hanging_instance_times_out_and_the_next_one_answers() -> None:
    async def hang(_: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response()

    status, _, headers, trace = asyncio.run(run({"a": hang, "b": reply(200)}, CHAT, timeout_s=0.3))
    assert status == 200 and headers["x-routelens-instance"] == "b"
    assert [a.status for a in trace.attempts] == [AttemptStatus.TIMEOUT, AttemptStatus.OK]
    assert trace.attempts[0].instance == "a" and trace.fallback_triggered
