"""Seed 000: ``["条款", "合同", "第x章"]`` route to the legal model; "第x章" is a chapter of any number.

A chapter reference (Arabic, full-width or Chinese numerals, spaces allowed around the number)
counts as a legal term through the real path: the gateway analyses the request, the policy's
``contains_legal_terms(prompt)`` reads the default legal list, and the rule picks the model.
第 alone, 章 alone, or a chapter without a number do not.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from router_core.rules.condition import compile_condition
from router_core.rules.condition.features import prompt_matcher
from router_core.rules.load import load_policy
from router_core.rules.request import RequestView
from schemas.config import RouteLensConfig
from schemas.config.routing import DEFAULT_LEGAL_TERMS, RoutingSettings
from tests.router_core.gateway.gateway_kit import gateway_client, trace_of
from tests.router_core.gateway.test_forwarding import reply

ROOT = Path(__file__).resolve().parents[3]
CHAPTERS = ["请总结第12章的要点", "第三章讲了什么", "见第 12 章", "第十二章的交付义务", "第１２章", "第 三 章",
            "Summarise 第3章 please", "第一百零八章", "第\u3000七\u3000章"]
NOT_CHAPTERS = ["这是第一次来", "本章小结", "章鱼怎么做", "第章", "第12节", "第一个章节", "第x章", "排名第3", "12章"]
# The seed's matrix rule, over a two-model fleet: n is the legal (32k) model.
LEGAL_RULE = ('routing_matrix:\n  - {rule_name: long_context_priority, '
              'condition: "input_length > 8000 || contains_legal_terms(prompt)", primary_target: n}\n')


def view(prompt: str) -> RequestView:
    return RequestView(input_length=20, query_length=20, language="zh", intent=None, intent_confidence=None,
                       file_types=(), has_attachments=False, request_time=datetime(2026, 6, 1, tzinfo=UTC),
                       prompt=prompt)


def chat(text: str) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": text}]}


def test_a_chapter_of_any_number_routes_to_the_legal_model_through_the_gateway() -> None:
    async def run() -> None:
        async with gateway_client({"a": reply(200), "b": reply(200)},
                                  instances={"a": {"model": "m"}, "b": {"model": "n"}},
                                  policy=LEGAL_RULE) as (client, hooks):
            for text in CHAPTERS:
                resp = await client.post("/v1/chat/completions", json=chat(text))
                trace = trace_of(hooks, resp.headers)
                assert resp.status == 200 and resp.headers["x-routelens-instance"] == "b", text
                assert trace.rule == "long_context_priority" and trace.policy is not None, text
                assert trace.policy.tried[0].detail[-1] == "contains_legal_terms(prompt): true", text
            for text in NOT_CHAPTERS:
                resp = await client.post("/v1/chat/completions", json=chat(text))
                trace = trace_of(hooks, resp.headers)
                assert trace.policy is not None and trace.policy.rule is None, text

    asyncio.run(run())


def test_the_shipped_seed_policy_sends_chapters_to_the_32k_model() -> None:
    config = RouteLensConfig.model_validate(yaml.safe_load((ROOT / "routelens.yaml").read_text(encoding="utf-8")))
    rules = load_policy(ROOT / "policies" / "seed000.yaml", config)
    for text in CHAPTERS:
        got = rules.match(view(text)).rule
        assert got is not None and (got.name, got.primary) == ("long_context_priority", "deepseek-v4-32k"), text
    for text in NOT_CHAPTERS:
        assert rules.match(view(text)).rule is None, text


def test_the_default_legal_list_holds_the_chapter_term() -> None:
    assert "第{n}章" in DEFAULT_LEGAL_TERMS and "第{n}章" in RoutingSettings().terms()["legal_terms"]


@pytest.mark.parametrize("text", CHAPTERS)
def test_a_number_placeholder_matches_any_numeral(text: str) -> None:
    assert prompt_matcher(["第{n}章"])(view(text))
    assert prompt_matcher(["合同", "第{N}章"])(view(text))  # needles are casefolded, the placeholder too
    assert compile_condition("prompt_contains('第{n}章')").evaluate(view(text))


@pytest.mark.parametrize("text", NOT_CHAPTERS)
def test_no_number_no_match(text: str) -> None:
    assert not prompt_matcher(["第{n}章"])(view(text))
    assert not prompt_matcher(["合同", "第{n}章"])(view(text))


def test_literal_needles_keep_matching_as_before() -> None:
    match = prompt_matcher(["Contract", "{n} 条"])
    assert match(view("the CONTRACT says")) and match(view("见 12 条")) and match(view("见12条"))
    assert not match(view("条款")) and not match(view("{n}"))
    assert prompt_matcher(["{n}"])(view("第3")) and not prompt_matcher(["{n}"])(view("no digits"))
