"""Hostile bytes at the gateway's door, over a raw socket to a real port: OpenAI-shaped 400s, traced like every
refusal, nothing of the request in the log, and the gateway serving the next request.

The header cases that crashed the process (mmh3 on a session or affinity key) run against a real
gateway process in ``tests/e2e/test_hostile_headers.py``; here the ones that answered 500 or 200.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiohttp import web

from app.run.procs import free_port
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.header_check import invalid_header, is_utf8
from schemas.config import RouteLensConfig
from tests.polling import wait_until_async
from tests.raw_http import CHAT, Answer, exchange_async, request
from tests.router_core.gateway.gateway_kit import gateway_client
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply

BAD = b"\xffsecret\xfe"  # not UTF-8: aiohttp gives a str with lone surrogates


def test_invalid_header_names_the_first_value_that_is_not_utf8() -> None:
    assert invalid_header({"Host": "x", "X-Name": "café"}) is None  # UTF-8 beyond ASCII is fine
    bad = BAD.decode("utf-8", "surrogateescape")
    assert invalid_header({"Host": "x", "X-Tenant": bad, "X-Other": bad}) == "X-Tenant"
    assert not is_utf8(bad) and is_utf8("plain") and is_utf8("ünï")


def invalid_header_error(answer: Answer, name: str) -> dict[str, Any]:
    assert answer.status == 400 and answer.headers["content-type"].startswith("application/json"), answer
    error = answer.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_header", name)
    assert name in error["message"] and b"secret" not in answer.body  # the header named, never its value
    return error  # type: ignore[no-any-return]


POLICY = ("routing_matrix:\n"
          "  - {rule_name: slow, condition: \"header('x-throttle') == 'slow'\", primary_target: m}\n")


@pytest.mark.parametrize("header,sections,policy", [
    ("x-tenant", {"throttles": {"client": {"rate": 100, "burst": 100, "key": ["header:x-tenant"]}}}, None),
    ("x-throttle", {}, POLICY),
], ids=["client-throttle-key", "policy-condition"])
def test_a_header_that_is_not_utf8_is_a_traced_400_and_the_next_request_is_served(
        header: str, sections: dict[str, Any], policy: str | None) -> None:
    async def run() -> None:
        async with gateway_client({"a": reply(200)}, sections=sections, policy=policy) as (client, hooks):
            port = client.server.port
            assert port is not None
            answer = await exchange_async(port, request([(header.encode(), BAD)]))
            invalid_header_error(answer, header)
            trace = hooks.traces[answer.headers["x-request-id"]]  # traced as the chat route's other refusals
            assert (trace.outcome.http_status, trace.outcome.error_class, trace.attempts) == (400, "invalid_header", [])
            assert "secret" not in trace.model_dump_json()
            dry_run = await exchange_async(port, request([(header.encode(), BAD)], target=b"/v1/router/decide"))
            invalid_header_error(dry_run, header)  # every route: refused before any reads the header
            assert len(hooks.traces) == 1  # a route whose refusals leave no trace leaves none for this one
            served = await exchange_async(port, request([(header.encode(), b"slow")]))
            assert served.status == 200, served

    asyncio.run(run())


def test_a_keyed_gateway_traces_the_refusal_only_for_a_caller_it_admits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RL_HEADER_KEYS", "k-one")

    async def run() -> None:
        async with gateway_client({"a": reply(200)}, gateway={"api_keys_env": "RL_HEADER_KEYS"}) as (client, hooks):
            port = client.server.port
            assert port is not None
            for headers in ([(b"x-tenant", BAD)], [(b"Authorization", b"Bearer k-one" + BAD)],
                            [(b"Authorization", b"Bearer wrong"), (b"x-tenant", BAD)]):
                name = headers[-1][0].decode()
                invalid_header_error(await exchange_async(port, request(headers)), name)
            assert not hooks.traces  # an unknown caller writes no trace
            admitted = await exchange_async(port, request([(b"Authorization", b"Bearer k-one"), (b"x-tenant", BAD),
                                                           (b"X-Request-Id", b"client-7")]))
            invalid_header_error(admitted, "x-tenant")
            assert admitted.headers["x-request-id"] == "client-7" and list(hooks.traces) == ["client-7"]

    asyncio.run(run())


CANARY = b"CANARY" * 11_000  # a 66 KB credential: over aiohttp's 64 KiB line limit


@pytest.mark.parametrize("raw", [
    request([(b"Authorization", b"Bearer " + CANARY)]),
    request([], target=b"/v1/chat/completions?q=" + CANARY),
    request([(b"X-Request-Id", b"abc\x01\x7fdefCANARY")]),
    request([(b"Content-Type", b"text/CANARY")]),  # a second Content-Type
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03CANARY" + bytes(range(32)),  # a TLS ClientHello
], ids=["authorization-over-64k", "request-line-over-64k", "control-chars-in-x-request-id", "duplicate-content-type",
        "tls-on-a-plain-port"])
def test_a_request_aiohttp_cannot_parse_is_a_json_400_and_the_log_holds_none_of_its_bytes(
        raw: bytes, caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> tuple[Answer, Answer]:
        async with gateway_client({"a": reply(200)}) as (client, _):
            port = client.server.port
            assert port is not None
            refused = await exchange_async(port, raw)
            return refused, await exchange_async(port, request([]))

    with caplog.at_level(logging.DEBUG):
        refused, served = asyncio.run(run())
    assert refused.status == 400 and refused.headers["content-type"].startswith("application/json"), refused
    error = refused.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", None, "invalid_http")
    assert error["message"] and b"CANARY" not in refused.body and b"abc" not in refused.body
    logged = "\n".join(r.getMessage() + (r.exc_text or "") + str(r.exc_info or "") for r in caplog.records)
    assert "CANARY" not in logged and "abc" not in logged, logged[-2000:]
    assert served.status == 200


def test_a_client_that_leaves_mid_body_is_traced_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    config = RouteLensConfig.model_validate({  # no request reaches the instance (nothing listens there)
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{free_port()}"}]},
        "scrape": {"interval_s": 60, "timeout_s": 0.5}})
    hooks = MemoryHooks()

    async def run() -> None:
        # served as serve serves it: aiohttp's test server cancels the handler of a lost connection instead
        runner = web.AppRunner(Gateway(config, build_router(config), hooks).build_app(), access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            _, writer = await asyncio.open_connection("127.0.0.1", runner.addresses[0][1])
            head = request([(b"X-Request-Id", b"left-mid-body")], body=b"").replace(
                b"Content-Length: 0", b"Content-Length: 100000")
            writer.write(head + CHAT[:10])  # then gives up
            await writer.drain()
            await asyncio.sleep(0.05)  # the gateway is reading the body
            writer.close()
            await writer.wait_closed()
            await wait_until_async(lambda: "left-mid-body" in hooks.traces)
        finally:
            await runner.cleanup()

    with caplog.at_level(logging.DEBUG, logger="router_core"):
        asyncio.run(run())
    assert all(r.levelno < logging.WARNING for r in gateway_records(caplog)), caplog.text  # no ERROR, no traceback
    outcome = hooks.traces["left-mid-body"].outcome  # traced as every request the chat route refuses
    assert (outcome.http_status, outcome.error_class) == (499, "client_disconnected")


def gateway_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("router_core.gateway")]  # the instance's scrape aside
