"""Callers: refused requests are traced, repeated ids kept apart, context length, feedback rules."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import orjson
from aiohttp import web

from schemas import AttemptStatus, OutcomeStatus
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client
from tests.router_core.gateway.test_forwarding import reply

Calls = dict[str, int]


def counting(calls: Calls, iid: str, status: int = 200) -> Any:
    ok = reply(status)

    async def handler(request: web.Request) -> web.StreamResponse:
        calls[iid] = calls.get(iid, 0) + 1
        return await ok(request)

    return handler


def openai_error(body: bytes) -> dict[str, Any]:
    payload = orjson.loads(body)
    assert set(payload) == {"error"} and set(payload["error"]) == {"message", "type", "param", "code"}
    return payload["error"]  # type: ignore[no-any-return]


def test_refused_requests_have_a_trace_under_their_id() -> None:
    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a")}) as (client, hooks):
            cases = [
                (b"{not json", 400, "invalid_json"),
                (orjson.dumps({"model": "m", "messages": []}), 400, "invalid_request"),
                (orjson.dumps({"model": "nope", "messages": CHAT["messages"]}), 404, "model_not_found"),
            ]
            for raw, status, code in cases:
                resp = await client.post("/v1/chat/completions", data=raw,
                                         headers={"Content-Type": "application/json"})
                assert resp.status == status
                assert openai_error(await resp.read())["code"] == code
                trace = hooks.traces[resp.headers["x-request-id"]]
                assert trace.outcome.http_status == status and trace.outcome.error_class == code
                assert trace.outcome.status is OutcomeStatus.ERROR and not trace.attempts
            empty = hooks.traces["req-1"]
            assert (empty.features.requested_model, empty.features.n_messages) == ("m", 0)
            assert calls == {}

    asyncio.run(main())


def test_a_repeated_client_id_keeps_both_traces_apart() -> None:
    async def main() -> None:
        async with gateway_client({"a": reply(200)}) as (client, hooks):
            first = await client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "ops-1"})
            second = await client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "ops-1"})
            assert first.status == second.status == 200
            assert first.headers["x-request-id"] == "ops-1"
            again = second.headers["x-request-id"]
            assert again.startswith("ops-1~") and len(again) == len("ops-1~") + 8
            assert {"ops-1", again} <= set(hooks.traces)

    asyncio.run(main())


def test_a_client_id_costs_no_store_read_so_a_store_outage_cannot_fail_the_request() -> None:
    async def main() -> None:
        async with gateway_client({"a": reply(200)}) as (client, hooks):
            def down(request_id: str) -> None:
                raise ConnectionError("the store is down")

            hooks.lookup = down  # type: ignore[method-assign]
            resp = await client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "fresh-1"})
            assert resp.status == 200 and resp.headers["x-request-id"] == "fresh-1"
            assert "fresh-1" in hooks.traces

    asyncio.run(main())


def test_hostile_ids_and_bodies_get_openai_shaped_4xx() -> None:
    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a")}) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "x" * 129})
            assert resp.status == 400
            err = openai_error(await resp.read())
            assert (err["param"], err["code"]) == ("X-Request-Id", "invalid_request_id")
            assert resp.headers["x-request-id"] in hooks.traces
            for body in (b"[1, 2]", b'{"messages": "hi"}', b"\xff\xfe", b"[" * 5000):
                resp = await client.post("/v1/chat/completions", data=body)
                assert 400 <= resp.status < 500
                openai_error(await resp.read())
                assert resp.headers["x-request-id"] in hooks.traces
            assert calls == {}

    asyncio.run(main())


def test_a_request_larger_than_every_context_window_is_not_forwarded() -> None:
    async def main() -> None:
        calls: Calls = {}
        windows = {"a": {"context_window": 4096}, "b": {"context_window": 8192}}
        async with gateway_client({"a": counting(calls, "a"), "b": counting(calls, "b")},
                                  instances=windows) as (client, hooks):
            big = {"model": "m", "messages": [{"role": "user", "content": "word " * 2_000_00}]}
            resp = await client.post("/v1/chat/completions", json=big)
            assert resp.status == 400
            err = openai_error(await resp.read())
            assert (err["type"], err["param"], err["code"]) == (
                "invalid_request_error", "messages", "context_length_exceeded")
            assert "8192" in err["message"]
            trace = hooks.traces[resp.headers["x-request-id"]]
            assert trace.outcome.error_class == "context_length_exceeded" and not trace.attempts
            fits = {"model": "m", "messages": [{"role": "user", "content": "word " * 5000}]}  # ~6250 tokens
            resp = await client.post("/v1/chat/completions", json=fits)
            assert resp.status == 200 and resp.headers["x-routelens-instance"] == "b"
            assert calls == {"b": 1}

    asyncio.run(main())


def test_an_upstream_4xx_is_passed_through_and_recorded_as_an_error_attempt() -> None:
    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a", 400), "b": counting(calls, "b")}) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT)
            assert resp.status == 400 and calls == {"a": 1}  # an answer: no failover
            trace = hooks.traces[resp.headers["x-request-id"]]
            (attempt,) = trace.attempts
            assert (attempt.status, attempt.http_status) == (AttemptStatus.HTTP_ERROR, 400)
            assert trace.outcome.error_class == "upstream_400"

    asyncio.run(main())


async def quality(client: Any) -> list[Any]:
    resp = await client.get("/v1/router/state")
    return (await resp.json())["quality"]  # type: ignore[no-any-return]


def test_feedback_takes_one_verdict_per_traced_request_and_known_classes() -> None:
    async def main() -> None:
        async with gateway_client({"a": reply(200)}) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "fb-1"})
            assert resp.status == 200
            verdict = {"request_id": "fb-1", "correct": False, "expected_class": "chat"}
            banana = await client.post("/v1/feedback", json={**verdict, "expected_class": "banana"})
            assert banana.status == 400 and openai_error(await banana.read())["param"] == "expected_class"
            typo = await client.post("/v1/feedback", json={**verdict, "expected_model": "m-typo"})  # the fleet: "m"
            assert typo.status == 400 and openai_error(await typo.read())["param"] == "expected_model"
            for loose in ("yes", "false", 0, 1, None):  # a JSON boolean only (lax pydantic read "yes" as true)
                vague = await client.post("/v1/feedback", json={**verdict, "correct": loose})
                assert vague.status == 400 and openai_error(await vague.read())["param"] == "correct", loose
            first = await client.post("/v1/feedback", json={**verdict, "expected_model": "m"})
            assert first.status == 202
            learned = await quality(client)
            assert learned, "the first verdict is learned"
            for _ in range(3):
                repeat = await client.post("/v1/feedback", json=verdict)
                assert repeat.status == 409
                assert openai_error(await repeat.read())["code"] == "feedback_exists"
            assert len(hooks.feedback) == 1 and await quality(client) == learned  # not learned again
            unknown = await client.post("/v1/feedback", json={**verdict, "request_id": "never-sent"})
            assert unknown.status == 404 and openai_error(await unknown.read())["code"] == "trace_not_found"
            assert len(hooks.feedback) == 1

    asyncio.run(main())


def test_a_body_over_the_size_limit_is_a_traced_413() -> None:
    async def main() -> None:
        calls: Calls = {}
        async with gateway_client({"a": counting(calls, "a")}) as (client, hooks):
            resp = await client.post("/v1/chat/completions", data=io.BytesIO(b" " * (32 * 1024 * 1024 + 1)))
            assert resp.status == 413
            assert openai_error(await resp.read())["code"] == "request_too_large"
            assert hooks.traces[resp.headers["x-request-id"]].outcome.http_status == 413
            assert calls == {}

    asyncio.run(main())


def test_the_gateway_spreads_a_burst_over_equal_instances_between_scrapes() -> None:
    """20 requests at once, none answered until all arrived, one scrape: no instance above 40%."""
    from aiohttp.test_utils import TestClient, TestServer

    from router_core.decide.builtin import build_router
    from router_core.gateway import Gateway
    from schemas.config import RouteLensConfig
    from tests.router_core.gateway.test_forwarding import MemoryHooks, upstream

    async def main() -> None:
        arrived: dict[str, int] = {}
        everyone = asyncio.Event()
        ok = reply(200)

        def held(iid: str) -> Any:
            async def handler(request: web.Request) -> web.StreamResponse:
                arrived[iid] = arrived.get(iid, 0) + 1
                if sum(arrived.values()) == 20:
                    everyone.set()
                await asyncio.wait_for(everyone.wait(), 10)
                return await ok(request)
            return handler

        ids = [f"eq-{i}" for i in range(4)]
        kv = {"eq-0": 0.28}  # a little ahead at the scrape: without counting, the burst would all go there
        servers = {iid: TestServer(upstream(held(iid), kv.get(iid, 0.3))) for iid in ids}
        for server in servers.values():
            await server.start_server()
        try:
            config = RouteLensConfig.model_validate({
                "fleet": {"instances": [{"id": iid, "model": "m", "url": str(s.make_url("")).rstrip("/")}
                                        for iid, s in servers.items()]},
                "scrape": {"interval_s": 60}, "router": {"picker": "max"},
            })
            gw = Gateway(config, build_router(config), MemoryHooks())
            async with TestClient(TestServer(gw.build_app())) as client:
                async def one(n: int) -> str:
                    resp = await client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": f"b-{n}"})
                    assert resp.status == 200
                    return resp.headers["x-routelens-instance"]

                served = await asyncio.gather(*(one(n) for n in range(20)))
            assert max(served.count(iid) for iid in ids) <= 8, served
            assert all(gw.inflight.count(iid) == 0 for iid in ids)  # every attempt ended
        finally:
            for server in servers.values():
                await server.close()

    asyncio.run(main())


def test_an_unknown_route_or_method_is_an_openai_error_with_its_code() -> None:
    async def main() -> list[tuple[int, str | None, str | None]]:
        async with gateway_client({"a": reply(200)}) as (client, _):
            out = []
            for method, path in (("GET", "/v1/chat/completions"), ("GET", "/v1/nope")):
                resp = await client.request(method, path)
                out.append((resp.status, openai_error(await resp.read())["code"], resp.headers.get("Allow")))
            return out

    assert asyncio.run(main()) == [(405, "method_not_allowed", "POST"), (404, "not_found", None)]


def test_an_id_of_the_gateways_own_form_is_always_a_repeat() -> None:
    """The gateway made it for a request it traced: a client sending it back is retrying, whatever process made it."""
    from router_core.gateway.callers import RequestIds

    ids = RequestIds(lambda: "req_" + "0" * 20)
    got, refused = ids.of("req_7a76cc5b78864208ac5f")  # made by another worker, or before a restart
    assert refused is None and got.startswith("req_7a76cc5b78864208ac5f~") and len(got) == 24 + 9
    assert ids.of("req_7a76cc5b78864208ac5")[0] == "req_7a76cc5b78864208ac5"  # 19 hex: a client's own form


def test_a_client_id_another_worker_had_is_a_repeat_through_the_shared_claim() -> None:
    from router_core.gateway.callers import RequestIds
    from router_core.shared.base import MemoryShared

    shared = MemoryShared()  # one store both "workers" see, as Redis is
    first, second = RequestIds(lambda: "g", shared), RequestIds(lambda: "g", shared)

    async def main() -> tuple[str, str, str]:
        a = await first.claimed(first.of("ops-9")[0])
        b = await second.claimed(second.of("ops-9")[0])  # new to this worker's ledger, not to the claim
        return a, b, await RequestIds(lambda: "g").claimed("ops-9")  # no shared state: this process alone

    a, b, alone = asyncio.run(main())
    assert a == "ops-9" and b.startswith("ops-9~") and alone == "ops-9"
