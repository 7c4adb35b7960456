"""Gateway keys (401 in OpenAI's shape), upstream keys per instance, and forwarding the client's header."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from aiohttp import web

from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.auth import bearer_ok, is_loopback, open_notice
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client, trace_of
from tests.router_core.gateway.test_forwarding import OK_BODY, MemoryHooks

INVALID_KEY = {"type": "invalid_request_error", "param": None, "code": "invalid_api_key"}


def keyed_upstream(key: str, seen: list[str | None]) -> Any:
    """A vLLM started with ``--api-key key``: 401 without it."""

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") != f"Bearer {key}":
            body = {"error": {"message": "Unauthorized", "type": "invalid_request_error", "param": None, "code": None}}
            return web.Response(status=401, body=orjson.dumps(body), content_type="application/json")
        return web.Response(body=orjson.dumps(OK_BODY), content_type="application/json")

    return handler


def test_the_gateway_answers_401_in_openais_shape_without_one_of_its_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RL_TEST_KEYS", "k-one, k-two")
    seen: list[str | None] = []

    async def scenario() -> list[tuple[str, str | None, int, Any]]:
        out = []
        async with gateway_client({"a": keyed_upstream("unused", seen)},
                                  gateway={"api_keys_env": "RL_TEST_KEYS"}) as (client, hooks):
            for method, path, auth in [
                ("POST", "/v1/chat/completions", None), ("POST", "/v1/chat/completions", "Bearer wrong"),
                ("POST", "/v1/chat/completions", "k-one"), ("GET", "/v1/models", None),
                ("GET", "/v1/router/state", "Bearer k-on"), ("GET", "/v1/models", "Bearer k-two"),
                ("GET", "/health", None), ("GET", "/metrics", None),
            ]:
                headers = {"Authorization": auth} if auth else {}
                resp = await client.request(method, path, json=CHAT if method == "POST" else None, headers=headers)
                out.append((path, auth, resp.status, await resp.read()))
            assert not hooks.traces  # refused before routing: no trace, nothing sent upstream
        return out

    results = asyncio.run(scenario())
    for path, auth, status, body in results[:5]:
        assert status == 401, (path, auth)
        error = orjson.loads(body)["error"]
        assert {k: error[k] for k in INVALID_KEY} == INVALID_KEY and error["message"]
    assert [status for *_, status, _ in results[5:]] == [200, 200, 200]
    assert seen == []


def test_the_stores_read_token_reads_the_live_views_of_a_keyed_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    # The app reads /v1/router/state and /v1/alerts with the token it reads the traces with.
    monkeypatch.setenv("RL_TEST_KEYS", "k-one")
    monkeypatch.setenv("RL_TEST_READ", "r-token")

    async def scenario() -> list[int]:
        async with gateway_client({"a": keyed_upstream("unused", [])}, gateway={"api_keys_env": "RL_TEST_KEYS"},
                                  sections={"storage": {"read_token_env": "RL_TEST_READ"}}) as (client, _):
            read = {"Authorization": "Bearer r-token"}
            return [(await client.get("/v1/router/state", headers=read)).status,
                    (await client.get("/v1/alerts", headers=read)).status,
                    (await client.post("/v1/chat/completions", json=CHAT, headers=read)).status,  # not a key
                    (await client.post("/v1/router/breakers/instance/a/close", headers=read)).status]

    assert asyncio.run(scenario()) == [200, 200, 401, 401]


def test_a_named_but_unset_key_variable_fails_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RL_TEST_NO_SUCH_VAR", raising=False)
    base = {"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]}}
    for config in (base | {"gateway": {"api_keys_env": "RL_TEST_NO_SUCH_VAR"}},
                   {"fleet": {"instances": [base["fleet"]["instances"][0] | {"api_key_env": "RL_TEST_NO_SUCH_VAR"}]}}):
        cfg = RouteLensConfig.model_validate(config)
        with pytest.raises(ConfigError, match="RL_TEST_NO_SUCH_VAR"):
            Gateway(cfg, build_router(cfg), MemoryHooks()).build_app()


def test_an_upstream_that_requires_a_key_gets_its_instance_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RL_TEST_UPSTREAM_A", "secret-a")
    seen: list[str | None] = []

    async def scenario() -> tuple[int, Any]:
        async with gateway_client({"a": keyed_upstream("secret-a", seen)},
                                  instances={"a": {"api_key_env": "RL_TEST_UPSTREAM_A"}}) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT, headers={"Authorization": "Bearer client"})
            return resp.status, trace_of(hooks, resp.headers)

    status, trace = asyncio.run(scenario())
    assert status == 200 and (trace.outcome.prompt_tokens, trace.outcome.completion_tokens) == (3, 5)
    assert seen == ["Bearer secret-a"]  # the instance's key, not the client's header


def test_forward_authorization_sends_the_clients_header_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RL_TEST_UPSTREAM_A", "secret-a")
    seen: list[str | None] = []

    async def scenario(auth: str | None) -> int:
        async with gateway_client({"a": keyed_upstream("user-key", seen)}, gateway={"forward_authorization": True},
                                  instances={"a": {"api_key_env": "RL_TEST_UPSTREAM_A"}}) as (client, _):
            resp = await client.post("/v1/chat/completions", json=CHAT,
                                     headers={"Authorization": auth} if auth else {})
            await resp.read()
            return resp.status

    assert asyncio.run(scenario("Bearer user-key")) == 200
    assert asyncio.run(scenario(None)) == 401  # no client header: the instance key, which this upstream refuses
    assert seen == ["Bearer user-key", "Bearer secret-a"]


def test_an_open_gateway_is_allowed_on_loopback_only_and_says_so() -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2", "[::1]"):
        assert is_loopback(host)
        notice = open_notice(host, None, what="the gateway", setting="gateway.api_keys_env")
        assert notice is not None and "open" in notice and host in notice
    for host in ("0.0.0.0", "192.168.1.4", "::", "example.com"):
        assert not is_loopback(host)
        with pytest.raises(ConfigError, match="gateway.api_keys_env"):
            open_notice(host, None, what="the gateway", setting="gateway.api_keys_env")
    assert open_notice("0.0.0.0", frozenset({"k"}), what="the gateway", setting="gateway.api_keys_env") is None


def test_bearer_ok() -> None:
    keys = frozenset({"abc", "def"})
    assert bearer_ok("Bearer abc", keys) and bearer_ok("bearer def", keys)
    assert not any(bearer_ok(h, keys) for h in (None, "", "abc", "Bearer ", "Basic abc", "Bearer abcd"))
