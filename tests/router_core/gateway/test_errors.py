"""Routing errors through the gateway's one table: status, OpenAI error body, headers, and the trace still emitted."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.errors import (
    AttemptsExhausted,
    InvalidRequest,
    NoFeasibleInstance,
    RoutingError,
    UnknownModel,
)
from router_core.gateway import Gateway
from router_core.gateway.errors import error_for, status_of
from schemas import AttemptStatus, DecisionTrace, OutcomeStatus, RoutingMode
from schemas.config import RouteLensConfig
from schemas.errors import RoutelensError
from tests.router_core.gateway.test_forwarding import CHAT, MemoryHooks, reply


@dataclass
class Served:
    status: int
    error: dict[str, Any]
    headers: dict[str, str]
    trace: DecisionTrace
    calls: dict[str, int]


def upstream(iid: str, status: int, kv: float | None, calls: dict[str, int]) -> web.Application:
    """An instance answering chat with ``status``; its /metrics fails (HTTP 500) when ``kv`` is None."""
    answer = reply(status)

    async def chat(request: web.Request) -> web.Response:
        calls[iid] += 1
        return await answer(request)

    async def metrics(_: web.Request) -> web.Response:
        if kv is None:
            return web.Response(status=500)
        return web.Response(text=f'vllm:num_requests_waiting{{model_name="m"}} 0\nvllm:kv_cache_usage_perc {kv}\n')

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def serve(instances: dict[str, tuple[int, float | None]], config: dict[str, Any],
                payload: dict[str, Any] = CHAT) -> Served:
    calls = dict.fromkeys(instances, 0)
    servers = {iid: TestServer(upstream(iid, status, kv, calls)) for iid, (status, kv) in instances.items()}
    for server in servers.values():
        await server.start_server()
    cfg = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/")}
                                for iid, s in servers.items()]},
        "gateway": {"max_attempts": 2}, "scrape": {"interval_s": 60}, **config,
    })
    hooks = MemoryHooks()
    gateway = Gateway(cfg, build_router(cfg), hooks, new_id=lambda: "req-1")
    async with TestClient(TestServer(gateway.build_app())) as client:
        resp = await client.post("/v1/chat/completions", json=payload)
        body = orjson.loads(await resp.read())
        headers = {k.lower(): v for k, v in resp.headers.items()}
    for server in servers.values():
        await server.close()
    return Served(resp.status, body.get("error", {}), headers, hooks.traces["req-1"], calls)


REJECT = {"router": {"on_empty": "reject"}}
LATCH_AT_ONCE = {"constraints": [{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85, "exit_for": 0}]}


@pytest.mark.parametrize(("instances", "config", "filter_step"), [
    ({"a": (200, None), "b": (200, None)}, REJECT, "filter/freshness"),  # /metrics fails: never scraped
    ({"a": (200, 0.95), "b": (200, 0.97)}, REJECT | LATCH_AT_ONCE, "filter/kv-cache"),  # latched out
], ids=["stale", "latched-out"])
def test_reject_with_nothing_feasible_is_503(instances: dict[str, tuple[int, float | None]], config: dict[str, Any],
                                            filter_step: str) -> None:
    got = asyncio.run(serve(instances, config))
    assert got.status == 503
    assert (got.error["code"], got.error["type"]) == ("no_feasible_instance", "service_unavailable")
    assert got.error["message"].startswith("no feasible instance for model:m")
    assert got.headers["x-request-id"] == "req-1"
    assert "x-routelens-model" not in got.headers and "x-routelens-instance" not in got.headers
    assert got.calls == {"a": 0, "b": 0}
    trace = got.trace
    assert trace.mode is RoutingMode.SAFE
    assert trace.fallback_reason == "no feasible instance; rejecting (on_empty: reject)"
    assert (trace.outcome.status, trace.outcome.http_status, trace.outcome.error_class) == (
        OutcomeStatus.ERROR, 503, "no_feasible_instance")
    assert trace.selected_instance is None and trace.attempts == []
    assert [c.feasible for c in trace.candidates] == [False, False]
    assert next(s for s in trace.decision_trace if s.step == filter_step).rejected == ["a", "b"]


def test_all_attempts_failing_is_502_without_naming_an_instance_that_did_not_answer() -> None:
    got = asyncio.run(serve({"a": (503, 0.1), "b": (500, 0.2)}, {}))
    assert got.status == 502
    assert (got.error["code"], got.error["type"]) == ("all_attempts_failed", "upstream_error")
    assert "last error: HTTP 500" in got.error["message"]
    # no instance answered: the headers name none (the trace keeps the decision's first choice, a)
    assert "x-routelens-model" not in got.headers and "x-routelens-instance" not in got.headers
    assert got.calls == {"a": 1, "b": 1}
    trace = got.trace
    assert (trace.selected_model, trace.selected_instance) == ("m", "a")
    assert [a.status for a in trace.attempts] == [AttemptStatus.HTTP_ERROR] * 2
    assert (trace.outcome.http_status, trace.outcome.error_class) == (502, "all_attempts_failed")


def test_an_unknown_model_is_404_without_a_choice() -> None:
    got = asyncio.run(serve({"a": (200, 0.1)}, {}, CHAT | {"model": "gpt-9"}))
    assert got.status == 404
    assert (got.error["code"], got.error["type"], got.error["param"]) == (
        "model_not_found", "invalid_request_error", "model")
    assert "x-routelens-model" not in got.headers and "x-routelens-instance" not in got.headers
    assert got.headers["x-request-id"] == "req-1" and got.calls == {"a": 0}
    assert (got.trace.outcome.http_status, got.trace.outcome.error_class, got.trace.rule) == (
        404, "model_not_found", None)


class Unmapped(RoutingError):
    pass


class Narrower(NoFeasibleInstance):
    pass


class NotRouting(RoutelensError):
    pass


@pytest.mark.parametrize(("exc", "expected"), [
    (Unmapped("x"), (503, "routing_failed")),
    (Narrower("x"), (503, "no_feasible_instance")),
    (NoFeasibleInstance("x"), (503, "no_feasible_instance")),
    (AttemptsExhausted("x", last_error="timeout"), (502, "all_attempts_failed")),
    (UnknownModel("x"), (404, "model_not_found")),
    (InvalidRequest("x"), (400, "invalid_request")),
    (InvalidRequest("x", code="bad_messages"), (400, "bad_messages")),  # its own code wins
    (NotRouting("x"), (500, "internal_error")),
], ids=["unmapped-routing-error", "no-feasible-subclass", "no-feasible", "attempts-exhausted", "unknown-model",
        "invalid-request", "invalid-request-own-code", "not-in-the-table"])
def test_status_of_walks_the_mro(exc: RoutelensError, expected: tuple[int, str]) -> None:
    assert status_of(exc) == expected


def test_error_for_builds_the_openai_body() -> None:
    resp = error_for(Unmapped("could not route"), headers={"x-request-id": "r"})
    assert resp.status == 503 and resp.headers["x-request-id"] == "r"
    assert resp.body is not None
    assert orjson.loads(resp.body) == {"error": {"message": "could not route", "type": "service_unavailable",
                                                 "param": None, "code": "routing_failed"}}
