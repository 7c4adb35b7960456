"""The OpenAI face of one simulated instance, on a real loopback port."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession
from multidict import CIMultiDict

from schemas.config import SimSettings
from sim.corpus import ANSWERS, QUERIES
from sim.server import build_instance_app

MATH_ZH = "求解方程 x^2 - 5x + 6 = 0，并写出计算过程。"
CONTRACT = next(q.text for q in QUERIES if q.cls == "contract" and q.lang == "zh")


async def _post(url: str, body: Any, raw: bytes | None = None) -> tuple[int, CIMultiDict[str], bytes]:
    data = raw if raw is not None else orjson.dumps(body)
    async with ClientSession() as http, http.post(f"{url}/v1/chat/completions", data=data) as resp:
        return resp.status, resp.headers.copy(), await resp.read()


def _chat(spec, profile, settings, serve, body: Any = None, raw: bytes | None = None):
    async def scenario():
        async with serve(build_instance_app(spec, profile, settings)) as url:
            return await _post(url, body, raw)

    return asyncio.run(scenario())


def _user(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": text}], **extra}


def test_completion_validates_against_openai_contract(spec, profile, fast, serve, openai_schema):
    status, headers, raw = _chat(spec, profile, fast, serve, _user(MATH_ZH))
    body = orjson.loads(raw)
    assert status == 200
    openai_schema("CreateChatCompletionResponse").validate(body)
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert body["model"] == "sim-model"
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["message"]["refusal"] is None
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert headers["x-request-id"] == body["id"]
    assert any(fragment in choice["message"]["content"] for fragment in ANSWERS["math"]["zh"])


def test_stream_chunks_validate_and_end_with_done(spec, profile, fast, serve, openai_schema):
    body = _user(MATH_ZH, stream=True, stream_options={"include_usage": True})
    status, headers, raw = _chat(spec, profile, fast, serve, body)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = [event for event in raw.decode().split("\n\n") if event]
    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    chunks = [orjson.loads(event.removeprefix("data: ")) for event in events[:-1]]
    validator = openai_schema("CreateChatCompletionStreamResponse")
    for chunk in chunks:
        validator.validate(chunk)
    assert {chunk["id"] for chunk in chunks} == {chunks[0]["id"]}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    _, _, plain = _chat(spec, profile, fast, serve, _user(MATH_ZH))
    assert streamed == orjson.loads(plain)["choices"][0]["message"]["content"]


BAD_BODIES = [
    ("not-json", None, b"{not json", None, "invalid_json"),
    ("not-object", [1, 2], None, None, "invalid_type"),
    ("no-messages", {"model": "auto"}, None, "messages", "missing_required_parameter"),
    ("empty-messages", {"messages": []}, None, "messages", "invalid_type"),
    ("messages-string", {"messages": "hi"}, None, "messages", "invalid_type"),
    ("message-not-object", {"messages": ["hi"]}, None, "messages[0].role", "invalid_value"),
    ("no-role", {"messages": [{"content": "hi"}]}, None, "messages[0].role", "invalid_value"),
    ("bad-role", {"messages": [{"role": "wizard", "content": "hi"}]}, None, "messages[0].role", "invalid_value"),
    ("bad-content", {"messages": [{"role": "user", "content": 5}]}, None, "messages[0].content", "invalid_type"),
    ("zero-max-tokens", _user("hi", max_tokens=0), None, "max_tokens", "invalid_value"),
    ("stream-not-bool", _user("hi", stream="yes"), None, "stream", "invalid_type"),
]


@pytest.mark.parametrize(("body", "raw", "param", "code"), [case[1:] for case in BAD_BODIES],
                         ids=[case[0] for case in BAD_BODIES])
def test_bad_bodies_get_openai_style_400(spec, profile, fast, serve, openai_schema, body, raw, param, code):
    status, _, out = _chat(spec, profile, fast, serve, body, raw)
    error = orjson.loads(out)
    assert status == 400
    openai_schema("ErrorResponse").validate(error)
    assert error["error"]["type"] == "invalid_request_error"
    assert (error["error"]["param"], error["error"]["code"]) == (param, code)


@pytest.mark.parametrize(("text", "status"), [("合" * 512, 200), ("合" * 513, 400), ("a" * 2048, 200),
                                              ("a" * 2049, 400)], ids=["cjk-fits", "cjk-over", "latin-fits",
                                                                       "latin-over"])
def test_context_window_is_enforced(spec, profile, fast, serve, text, status):
    got, _, out = _chat(spec, profile, fast, serve, _user(text))
    assert got == status
    if status == 400:
        error = orjson.loads(out)["error"]
        assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
        assert text[:20] not in error["message"]


def test_max_tokens_bounds_the_completion(spec, profile, fast, serve):
    _, _, raw = _chat(spec, profile, fast, serve, _user(CONTRACT, max_tokens=5))
    body = orjson.loads(raw)
    assert body["usage"]["completion_tokens"] <= 5
    assert body["choices"][0]["finish_reason"] == "length"


def _content(spec, profile, settings, serve, text: str) -> str:
    # max_tokens below the context window's room: a prompt a token longer must not cut the answer elsewhere
    _, _, raw = _chat(spec, profile, settings, serve, _user(text, max_tokens=100))
    return orjson.loads(raw)["choices"][0]["message"]["content"]


def test_answers_are_deterministic_for_seed_instance_and_content(spec, profile, serve):
    seeded = SimSettings(zero_delay=True, seed=5)
    first = _content(spec, profile, seeded, serve, CONTRACT)
    assert _content(spec, profile, seeded, serve, CONTRACT) == first
    assert _content(spec, profile, seeded, serve, "  " + CONTRACT.upper() + "\n") == first
    other_seed = SimSettings(zero_delay=True, seed=6)
    assert _content(spec, profile, other_seed, serve, CONTRACT) != first


def test_models_and_health(spec, profile, fast, serve):
    async def scenario():
        async with serve(build_instance_app(spec, profile, fast)) as url, ClientSession() as http:
            async with http.get(f"{url}/v1/models") as models, http.get(f"{url}/health") as health:
                return await models.json(), health.status, await health.json()

    models, status, health = asyncio.run(scenario())
    assert [card["id"] for card in models["data"]] == ["sim-model"]
    assert (status, health) == (200, {"status": "ok"})
