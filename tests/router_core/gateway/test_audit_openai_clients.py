"""The OpenAI API as the official SDK uses it, through a real gateway on 127.0.0.1 (audit of what clients send).

Each instance records exactly what it received. The fields an SDK sends reach the instance as
sent, a stream's tool-call deltas, usage chunk and ``[DONE]`` reach the client intact; what the
gateway reads of a request (tool definitions and calls in its size, refusal parts as words, a null
``max_completion_tokens``) decides as it should; a degraded cache answer reaches a stream as one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import openai
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from router_core.gateway import Gateway
from schemas.hashing import query_hash
from tests.router_core.gateway.gateway_kit import served_gateway, trace_of
from tests.router_core.gateway.test_forwarding import MemoryHooks

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
ARGS = ['{"city"', ': "Par', 'is"}']


def big_tools(chars: int) -> list[dict[str, Any]]:
    """One tool whose schema is about ``chars`` characters of JSON (agents' schemas are often most of the prompt)."""
    props = {f"field_{i}": {"type": "string", "description": "what this parameter of the tool means " * 2}
             for i in range(chars // 90)}
    return [{"type": "function", "function": {"name": "big", "parameters": {"type": "object", "properties": props}}}]


def recorder(seen: list[dict[str, Any]]) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """An instance that keeps each body it gets and answers with a tool call when offered tools."""
    async def chat(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        seen.append(body)
        tools = bool(body.get("tools"))
        n = body.get("n") or 1
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": "sunny"}
            if tools:
                call = {"name": "get_weather", "arguments": "".join(ARGS)}
                message = {"role": "assistant", "content": None,
                           "tool_calls": [{"id": "call_0", "type": "function", "function": call}]}
            return web.json_response({"id": "c1", "object": "chat.completion", "created": 1, "model": body["model"],
                                      "choices": [{"index": i, "message": message, "finish_reason": "stop"}
                                                  for i in range(n)], "usage": USAGE})
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": body["model"]}

        async def send(choice: dict[str, Any] | None, **more: Any) -> None:
            chunk = {**head, "choices": [] if choice is None else [choice], **more}
            await out.write(b"data: " + orjson.dumps(chunk) + b"\n\n")

        await send({"index": 0, "delta": {"role": "assistant", "tool_calls": [{
            "index": 0, "id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}})
        for piece in ARGS:
            await send({"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}})
        await send({"index": 0, "delta": {}, "finish_reason": "tool_calls"})
        if (body.get("stream_options") or {}).get("include_usage"):
            await send(None, usage=USAGE)
        await out.write(b"data: [DONE]\n\n")
        await out.write_eof()
        return out

    return chat


@asynccontextmanager
async def sdk_gateway(instances: dict[str, dict[str, Any]], *, policy: str | None = None,
                      sections: dict[str, Any] | None = None,
                      ) -> AsyncIterator[tuple[openai.AsyncOpenAI, TestClient[Any, Any], MemoryHooks, Gateway,
                                               dict[str, list[dict[str, Any]]]]]:
    """The official SDK's client of a gateway whose instances (``a``, ``b``) record what they receive."""
    seen: dict[str, list[dict[str, Any]]] = {iid: [] for iid in instances}
    handlers = {iid: recorder(seen[iid]) for iid in instances}
    async with served_gateway(handlers, gateway={"max_attempts": 2, "upstream_timeout_s": 5.0}, instances=instances,
                              policy=policy, sections=sections) as (client, hooks, gw):
        sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="sk-test", max_retries=0, timeout=10)
        async with sdk:
            yield sdk, client, hooks, gw, seen


SENT: dict[str, Any] = {
    "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": False, "response_format": {"type": "json_schema", "json_schema": {
        "name": "w", "schema": {"type": "object", "properties": {"t": {"type": "number"}}}, "strict": True}},
    "n": 2, "logprobs": True, "top_logprobs": 2, "max_completion_tokens": 50, "stop": ["\n"], "seed": 42,
    "user": "u-1", "metadata": {"tier": "gold"}, "store": False, "reasoning_effort": "low",
}
EXTRA = {"guided_json": {"type": "object"}, "top_k": 5, "chat_template_kwargs": {"enable_thinking": False}}
CONVERSATION = [
    {"role": "developer", "content": "Be terse."},
    {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                 {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                                           "function": {"name": "get_weather", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "21C"}]},
]


def test_what_the_sdk_sends_reaches_the_instance_as_sent_and_a_stream_comes_back_intact() -> None:
    async def run() -> None:
        async with sdk_gateway({"a": {}}) as (sdk, _, hooks, _gw, seen):
            got = await sdk.chat.completions.create(model="m", messages=CONVERSATION, extra_body=EXTRA,
                                                    **SENT)
            assert len(got.choices) == 2 and got.choices[0].message.tool_calls is not None
            assert got.choices[0].message.tool_calls[0].function.arguments == "".join(ARGS)
            body = seen["a"][-1]
            assert body["messages"] == CONVERSATION and body["model"] == "m"
            assert {k: body[k] for k in SENT} == SENT and {k: body[k] for k in EXTRA} == EXTRA
            stream = await sdk.chat.completions.create(model="m", messages=ASK, tools=TOOLS,
                                                       stream=True, stream_options={"include_usage": True})
            chunks = [c async for c in stream]
            deltas = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
            assert deltas[0].id == "call_0" and [d.function.arguments for d in deltas if d.function] == ["", *ARGS]
            assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 18
            assert seen["a"][-1]["tools"] == TOOLS
            quiet = await sdk.chat.completions.create(model="m", messages=ASK, tools=TOOLS,
                                                      stream=True)
            assert [c.usage for c in [c async for c in quiet]] == [None] * 5  # not asked for: not sent
            assert seen["a"][-1]["stream_options"] == {"include_usage": True}  # the gateway reads it all the same
            assert [t.outcome.completion_tokens for t in hooks.traces.values()] == [7, 7, 7]

    asyncio.run(run())


BIG_WINDOWS = {"a": {"model": "m", "context_window": 4096}, "b": {"model": "n", "context_window": 131072}}


@pytest.mark.parametrize("where", ["tools", "tool_call_arguments"])
def test_tool_definitions_and_calls_count_toward_the_context_window(where: str) -> None:
    # before: only the messages' text was counted, so ~12k tokens of tool schema was "1 token":
    # a 4k-window instance was chosen and a pinned 4k model forwarded what it cannot hold
    async def run() -> None:
        big = big_tools(48_000)
        if where == "tools":
            kw: dict[str, Any] = {"messages": ASK, "tools": big}
        else:
            written = {"name": "write", "arguments": orjson.dumps(big).decode()}
            call = {"id": "c", "type": "function", "function": written}
            kw = {"messages": [*ASK, {"role": "assistant", "content": None, "tool_calls": [call]},
                               {"role": "tool", "tool_call_id": "c", "content": "ok"}]}
        async with sdk_gateway(BIG_WINDOWS) as (sdk, _, hooks, _gw, seen):
            raw = await sdk.chat.completions.with_raw_response.create(model="auto", max_tokens=100, **kw)
            assert raw.headers["x-routelens-instance"] == "b" and not seen["a"]
            features = trace_of(hooks, raw.headers).features
            assert features.est_input_tokens > 4096 and features.input_chars > 48_000
            assert features.language.value == "en"  # of the words, not of the schema
            with pytest.raises(openai.BadRequestError) as refused:
                await sdk.chat.completions.create(model="m", max_tokens=100, **kw)
            assert refused.value.code == "context_length_exceeded" and not seen["a"]

    asyncio.run(run())


def test_a_null_max_completion_tokens_leaves_max_tokens_in_force() -> None:
    # LlamaIndex and LiteLLM send unset fields as null; before, a null max_completion_tokens hid max_tokens
    async def run() -> None:
        async with sdk_gateway(BIG_WINDOWS) as (_, client, hooks, _gw, seen):
            body = {"model": "m", "messages": ASK, "max_completion_tokens": None, "max_tokens": 10_000}
            resp = await client.post("/v1/chat/completions", json=body)
            err = orjson.loads(await resp.read())["error"]
            assert resp.status == 400 and err["code"] == "context_length_exceeded" and not seen["a"]
            assert trace_of(hooks, resp.headers).features.max_tokens == 10_000
            refused = await client.post("/v1/chat/completions", json={**body, "messages": [{"role": "critic"}]})
            assert refused.status == 400 and trace_of(hooks, refused.headers).features.max_tokens == 10_000

    asyncio.run(run())


def test_a_text_part_without_text_is_no_text() -> None:
    # before: a null text was the word "None", hashed and counted as the query
    async def run() -> None:
        async with sdk_gateway({"a": {}}) as (sdk, _, hooks, _gw, _s):
            raw = await sdk.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": [{"type": "text", "text": None}]}])
            trace = trace_of(hooks, raw.headers)
            assert trace.query_hash == query_hash("") and trace.features.input_chars == 0

    asyncio.run(run())


TO_VISION = ('routing_matrix:\n  - {rule_name: vision, condition: "has_attachments", primary_target: n,'
             ' fallback_chain: [m]}\n')


def test_an_assistant_refusal_part_is_words_not_an_attachment() -> None:
    # before: any part but "text" was an attachment, so a replayed refusal sent the request to the vision rule
    async def run() -> None:
        refused = [*ASK, {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot say."}]},
                   {"role": "user", "content": "Then tell me about Rome."}]
        image = [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                              {"type": "image_url", "image_url": {"url": "https://x.org/c.png"}}]}]
        async with sdk_gateway({"a": {"model": "m"}, "b": {"model": "n"}}, policy=TO_VISION) as (sdk, _, hooks, _g, _s):
            raw = await sdk.chat.completions.with_raw_response.create(model="auto", messages=refused)
            trace = trace_of(hooks, raw.headers)
            assert raw.headers["x-routelens-instance"] == "a" and trace.rule != "vision"
            assert not trace.features.has_attachments
            words = ("What is the weather in Paris?", "I cannot say.", "Then tell me about Rome.")
            assert trace.features.input_chars == sum(map(len, words))
            raw = await sdk.chat.completions.with_raw_response.create(model="auto", messages=image)
            assert raw.headers["x-routelens-instance"] == "b" and trace_of(hooks, raw.headers).rule == "vision"

    asyncio.run(run())


CACHED = {"id": "c0", "object": "chat.completion", "created": 1, "model": "m",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "from the cache"},
                       "finish_reason": "stop"}], "usage": USAGE}
NOTHING_FEASIBLE = {  # instance a's KV cache (10%) is over this constraint: the degraded steps run
    "constraints": [{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.05, "exit_for": 0}],
    "router": {"on_empty": "reject"},
    "economics": {"degraded": {"steps": ["cache", "reject"], "cache": {"enabled": True}}},
}


def test_a_cached_answer_reaches_a_stream_as_a_stream() -> None:
    # before: the cached JSON body was sent as it was, and the SDK's stream read no chunk at all
    async def run() -> None:
        async with sdk_gateway({"a": {}}, sections=NOTHING_FEASIBLE) as (sdk, _, hooks, gw, _s):
            ask = [{"role": "user", "content": "hello"}]
            key = gw.answers.key("m", "hello", {"messages": ask})
            assert key is not None
            gw.answers.put(key, orjson.dumps(CACHED), "application/json")
            whole = await sdk.chat.completions.create(model="m", messages=ask)
            assert whole.choices[0].message.content == "from the cache"
            stream = await sdk.chat.completions.create(model="m", messages=ask, stream=True)
            chunks = [c async for c in stream]
            assert [c.choices[0].delta.content for c in chunks] == ["from the cache"]
            assert [t.mode.value for t in hooks.traces.values()] == ["cache", "cache"]

    asyncio.run(run())


def test_the_cache_does_not_answer_what_its_key_does_not_hold() -> None:
    # the key is the model and the last user message's text: every image-only question shared one key,
    # and a tool loop's turns shared their question's; before, each got the other's cached answer
    async def run() -> None:
        async with sdk_gateway({"a": {}}, sections=NOTHING_FEASIBLE) as (sdk, _, hooks, gw, _s):
            for text in ("", ASK[0]["content"]):  # a first question, no earlier turns: as the gateway keys it
                key = gw.answers.key("m", text, {"messages": [{}]})
                assert key is not None
                gw.answers.put(key, orjson.dumps(CACHED), "application/json")
            image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x.org/c.png"}}]}]
            loop = [*ASK, CONVERSATION[2], {"role": "tool", "tool_call_id": "call_1", "content": "21C"}]
            for messages, kw, why in [
                (image, {}, "the request has attachments"),
                (ASK, {"tools": TOOLS}, "the request offers tools"),
                (loop, {}, "the conversation does not end with the user's message"),
            ]:
                with pytest.raises(openai.InternalServerError) as info:  # 503 no_feasible_instance
                    await sdk.chat.completions.create(model="m", messages=messages, **kw)
                assert info.value.status_code == 503
                trace = trace_of(hooks, info.value.response.headers)
                step = next(s for s in trace.decision_trace if s.step == "degrade/cache")
                assert step.reason == f"not from the cache: {why}" and trace.mode.value != "cache"

    asyncio.run(run())


def test_the_same_words_in_another_conversation_are_not_answered_from_the_cache() -> None:
    # before, the key was the model and the last user message's words: "yes" after one question got the
    # answer cached for "yes" after another, and one system prompt's answer served another's
    async def run() -> None:
        async with sdk_gateway({"a": {}}, sections=NOTHING_FEASIBLE) as (sdk, _, hooks, gw, _s):
            first = [{"role": "system", "content": "You sell bikes."}, {"role": "user", "content": "Yes"}]
            key = gw.answers.key("m", "yes", {"messages": first})
            assert key is not None
            gw.answers.put(key, orjson.dumps(CACHED), "application/json")
            same = await sdk.chat.completions.create(model="m", messages=[*first[:1], {"role": "user",
                                                                                        "content": " YES "}])
            assert same.choices[0].message.content == "from the cache"  # the same turns, the question normalised
            for system in ("You sell boats.", None):
                messages = [{"role": "user", "content": "Yes"}] if system is None else \
                    [{"role": "system", "content": system}, {"role": "user", "content": "Yes"}]
                with pytest.raises(openai.InternalServerError):
                    await sdk.chat.completions.create(model="m", messages=messages)
            assert len(gw.answers) == 1 and gw.answers.hits == 1

    asyncio.run(run())
