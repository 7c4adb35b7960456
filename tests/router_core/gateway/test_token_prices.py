"""Token prices: a request costs its per-request base plus its tokens at a provider's per-million prices.

Before, every request cost `cost.base` whatever it held: a hosted provider billing per token could
only be given a made-up flat price, the trace's cost and a spend budget counted that, and the cost
scorer could not tell a cheap short request from a dear long one.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from aiohttp import web

from router_core import expected_tokens, policy_hash
from router_core.rules.route import priced
from schemas.config import RouteLensConfig
from schemas.fleet import CostSpec
from schemas.trace import RequestFeatures
from tests.router_core.gateway.gateway_kit import served_gateway, trace_of
from tests.router_core.gateway.test_upstream_429 import replays

PER_TOKEN = {"base": 0.01, "input_per_1m": 3.0, "output_per_1m": 15.0, "expected_output_tokens": 400}
USAGE = {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}


def features(est_input: int, max_tokens: int | None = None) -> RequestFeatures:
    return RequestFeatures(requested_model="auto", n_messages=1, input_chars=4 * est_input,
                           est_input_tokens=est_input, max_tokens=max_tokens, stream=False, language="en")


def test_a_price_is_the_base_plus_the_tokens_at_their_prices_times_the_surge() -> None:
    cost = CostSpec(**PER_TOKEN, surge_multiplier=2.0)
    assert priced(cost, False, 1200, 300) == pytest.approx(0.01 + 1200 * 3e-6 + 300 * 15e-6)
    assert priced(cost, True, 1200, 300) == pytest.approx(2 * (0.01 + 1200 * 3e-6 + 300 * 15e-6))
    flat = CostSpec(base=1.8, surge_multiplier=2.1)
    assert priced(flat, True, 10**6, 10**6) == 1.8 * 2.1 and not flat.per_token  # the seed's table: per request
    assert expected_tokens(cost, features(900)) == (900, 400)
    assert expected_tokens(cost, features(900, max_tokens=50)) == (900, 50)  # never more than it may take
    assert expected_tokens(cost, features(900, max_tokens=4000)) == (900, 400)


def test_the_policy_hash_is_unchanged_without_token_prices_and_changes_with_them() -> None:
    def config(cost: dict[str, Any]) -> RouteLensConfig:
        return RouteLensConfig.model_validate({"fleet": {"instances": [
            {"id": "a", "model": "m", "url": "http://127.0.0.1:9", "cost": cost}]}})

    flat = policy_hash(config({"base": 2.0}))
    assert flat == "sha256:672493eb8ff20704"  # what it was before token prices existed (computed at e16cb9f)
    assert policy_hash(config({"base": 2.0, "input_per_1m": 0, "expected_output_tokens": 256})) == flat
    assert policy_hash(config({"base": 2.0, "input_per_1m": 3.0})) != flat
    assert policy_hash(config({"base": 2.0, "expected_output_tokens": 100})) != flat


class Upstream:
    """Answers with ``USAGE`` (a stream: its usage chunk last); records nothing else."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            answer = {"id": "x", "object": "chat.completion", "model": body["model"], "usage": USAGE,
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                   "finish_reason": "stop"}]}
            return web.Response(body=orjson.dumps(answer), content_type="application/json")
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        chunk = {"id": "x", "object": "chat.completion.chunk", "model": body["model"],
                 "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
        await out.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        await out.write(b"data: " + orjson.dumps({**chunk, "choices": [], "usage": USAGE}) + b"\n\n")
        await out.write(b"data: [DONE]\n\n")
        return out


def test_the_trace_and_the_budget_count_the_answer_s_tokens_and_the_decision_replays() -> None:
    asyncio.run(_through_the_gateway())


async def _through_the_gateway() -> None:
    up = Upstream()
    sections = {"economics": {"budgets": {"bands": [{"name": "all-day", "hours": [[0, 24]], "max_spend": 1000.0}]}}}
    async with served_gateway({"a": up.handle}, instances={"a": {"cost": PER_TOKEN}}, sections=sections) as (
            client, hooks, gw):
        actual = 0.01 + 1200 * 3e-6 + 300 * 15e-6
        for stream in (False, True):
            got = await client.post("/v1/chat/completions", json={
                "model": "m", "stream": stream, "messages": [{"role": "user", "content": "hello " * 40}]})
            await got.read()
            trace = trace_of(hooks, got.headers)
            assert got.status == 200 and trace.outcome.prompt_tokens == 1200 and trace.outcome.completion_tokens == 300
            assert trace.outcome.cost == pytest.approx(actual)  # was 0.01, the base alone
            assert replays(gw, trace)
        await asyncio.sleep(0.05)  # the shared counters' background adds
        [band] = gw.budgets.state(datetime.now(UTC))
        assert band["calls"] == 2 and band["spend"] == pytest.approx(2 * actual, abs=1e-6)


def test_the_cost_scorer_weighs_the_request_s_expected_tokens() -> None:
    asyncio.run(_two_prices())


async def _two_prices() -> None:
    up = Upstream()
    dear_output = {"base": 0.1, "output_per_1m": 10_000.0}  # 0.1 + 4.0 at 400 expected tokens; 0.11 at one
    async with served_gateway({"a": up.handle, "b": up.handle}, sections={"scoring": {"preset": "balanced"}},
                              instances={"a": {"cost": {"base": 1.0}}, "b": {"cost": dear_output}}) as (
            client, hooks, gw):
        def cost_terms(trace: Any) -> dict[str, float]:
            at = [w.name for w in trace.score_weights].index("cost")
            return {c.instance: c.score_terms[at] for c in trace.candidates}

        for max_tokens, cheaper in ((None, "a"), (1, "b")):
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                    **({} if max_tokens is None else {"max_tokens": max_tokens})}
            got = await client.post("/v1/chat/completions", json=body)
            await got.read()
            trace = trace_of(hooks, got.headers)
            assert cost_terms(trace)[cheaper] == 1.0 and min(cost_terms(trace).values()) == 0.0
            assert replays(gw, trace)
