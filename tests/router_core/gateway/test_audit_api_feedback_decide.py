"""Feedback's 400s name their code and field; ``/v1/router/decide`` refuses an unknown forced arm as chat does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.router_core.experiments.test_gateway_arms import experiments
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client
from tests.router_core.gateway.test_callers import counting, openai_error


async def post(path: str, payload: bytes, headers: dict[str, str] | None = None,
               sections: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    async with gateway_client({"a": counting({}, "a")}, sections=sections) as (client, _):
        await client.post("/v1/chat/completions", json=CHAT)  # req-0, the trace feedback names
        resp = await client.post(path, data=payload, headers={"Content-Type": "application/json", **(headers or {})})
        body = await resp.read()
        return resp.status, (openai_error(body) if resp.status >= 400 else {})


@pytest.mark.parametrize("payload", [b"[1]", b"null", b'"req-0"', b"3"])
def test_a_feedback_body_that_is_not_an_object_is_a_400_with_a_code(payload: bytes) -> None:
    """It was a 400 with ``"code": null``; chat's code for a body breaking the contract is ``invalid_request``."""
    status, error = asyncio.run(post("/v1/feedback", payload))
    assert status == 400 and error["code"] == "invalid_request" and "JSON object" in error["message"]


def test_a_naive_feedback_ts_names_the_ts_field() -> None:
    """A ``ts`` without a zone was ``param: null`` (the model-level rule has no location)."""
    status, error = asyncio.run(post("/v1/feedback", b'{"request_id": "req-0", "correct": true, '
                                                     b'"ts": "2026-01-01T00:00:00"}'))
    assert (status, error["param"], error["code"]) == (400, "ts", "invalid_value")


def test_other_feedback_errors_keep_their_field_and_a_zoned_ts_is_taken() -> None:
    status, error = asyncio.run(post("/v1/feedback", b'{"request_id": "req-0", "correct": "maybe"}'))
    assert (status, error["param"], error["code"]) == (400, "correct", "invalid_value")
    status, _ = asyncio.run(post("/v1/feedback", b'{"request_id": "req-0", "correct": true, '
                                                 b'"ts": "2026-01-01T00:00:00+02:00"}'))
    assert status == 202


def test_decide_refuses_an_unknown_forced_arm_as_chat_does() -> None:
    """It answered 200 with the base router's decision; chat answers 400 ``unknown_arm``."""

    async def main() -> None:
        async with gateway_client({"a": counting({}, "a")}, sections={"experiments": experiments()}) as (client, _):
            arm = {"x-routelens-arm": "nope"}
            chat = await client.post("/v1/chat/completions", json=CHAT, headers=arm)
            decide = await client.post("/v1/router/decide", json=CHAT, headers=arm)
            want = openai_error(await chat.read())
            got = openai_error(await decide.read())
            assert chat.status == decide.status == 400
            assert (got["code"], got["param"], got["message"]) == (want["code"], want["param"], want["message"])
            assert got["code"] == "unknown_arm" and got["param"] == "x-routelens-arm"
            known = await client.post("/v1/router/decide", json=CHAT, headers={"x-routelens-arm": "y"})
            assert known.status == 200  # a known arm is accepted; the base router decides (no arm is drawn)
            assert (await client.post("/v1/router/decide", json=CHAT)).status == 200

    asyncio.run(main())


def test_decide_checks_the_contract_before_the_forced_arm_as_chat_does() -> None:
    async def main() -> None:
        async with gateway_client({"a": counting({}, "a")}, sections={"experiments": experiments()}) as (client, _):
            bad = {"model": "m", "messages": "hello"}
            for path in ("/v1/chat/completions", "/v1/router/decide"):
                resp = await client.post(path, json=bad, headers={"x-routelens-arm": "nope"})
                assert resp.status == 400 and openai_error(await resp.read())["code"] == "invalid_request", path

    asyncio.run(main())


def test_decide_with_an_empty_object_says_what_is_missing() -> None:
    """``{}`` was told "request body must be a JSON object": it is one, without messages or request."""
    status, error = asyncio.run(post("/v1/router/decide", b"{}"))
    assert status == 400 and error["param"] == "messages" and "'messages'" in error["message"]
    assert "must be a JSON object" not in error["message"]
