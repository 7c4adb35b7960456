"""The chat request model against OpenAI's own description (tests/contracts/openai): the fields RouteLens reads
exist there with the same JSON types and bounds, and the roles are OpenAI's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from schemas.openai_chat import ChatCompletionRequest, ChatMessage

CONTRACT = json.loads((Path(__file__).resolve().parents[1] / "contracts" / "openai"
                       / "chat_completions_subset.openapi.json").read_text())
SCHEMAS = CONTRACT["components"]["schemas"]


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = {**SCHEMAS[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _props(node: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node)
    out = dict(node.get("properties", {}))
    for part in node.get("allOf", []):
        out.update(_props(part))
    return out


def _types(node: dict[str, Any]) -> set[str]:
    node = _resolve(node)
    found: set[str] = set()
    for alt in node.get("anyOf", []) + node.get("oneOf", []):
        found |= _types(alt)
    if "type" in node:
        found |= set(node["type"]) if isinstance(node["type"], list) else {node["type"]}
    return found - {"null"}


def _bounds(node: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node)
    for alt in node.get("anyOf", []):
        if _resolve(alt).get("type") not in (None, "null"):
            node = _resolve(alt)
    return {k: node[k] for k in ("minimum", "maximum") if k in node}


OURS = ChatCompletionRequest.model_json_schema()["properties"]
THEIRS = _props({"$ref": "#/components/schemas/CreateChatCompletionRequest"})


@pytest.mark.parametrize("field", sorted(OURS))
def test_each_field_read_is_openai_s_with_its_type_and_bounds(field: str) -> None:
    assert field in THEIRS, f"{field} is not in OpenAI's CreateChatCompletionRequest"
    ours, theirs = OURS[field], THEIRS[field]
    mine = {t for alt in ours.get("anyOf", [ours]) for t in ([alt["type"]] if "type" in alt else
                                                              (["object"] if "$ref" in alt else []))} - {"null"}
    assert mine <= _types(theirs) | {"object"} and mine, (field, mine, _types(theirs))
    if b := _bounds(theirs):
        got = next((alt for alt in ours.get("anyOf", [ours]) if alt.get("type") in ("integer", "number")), {})
        assert {k: got.get(k) for k in b} == b, (field, got, b)


def test_the_roles_are_openai_s() -> None:
    theirs = set()
    for variant in _resolve({"$ref": "#/components/schemas/ChatCompletionRequestMessage"})["oneOf"]:
        theirs |= set(_resolve(_resolve(variant)["properties"]["role"]).get("enum", []))
    ours = set(ChatMessage.model_json_schema()["properties"]["role"]["enum"])
    assert ours == theirs, (ours, theirs)


@pytest.mark.parametrize("body", [
    {"messages": []}, {"messages": [{"role": {}, "content": None}]}, {"messages": [{"role": "user", "content": 3}]},
    {"messages": [{"role": "user"}], "temperature": 2.5}, {"messages": [{"role": "user"}], "n": 0},
    {"messages": [{"role": "user", "content": [{"text": "no type"}]}]},
])
def test_what_openai_refuses_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate(body)


def test_fields_it_does_not_read_are_kept_for_the_instance() -> None:
    req = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], "seed": 7,
                                                "response_format": {"type": "json_object"}})
    assert req.model == "auto" and req.model_extra == {"seed": 7, "response_format": {"type": "json_object"}}
