"""The runtime response schema is exactly what the vendored OpenAPI file yields (they cannot drift)."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from probes.contracts import RESPONSE_SCHEMA_PATH, extract, response_schema
from tests.contracts import contract

OPENAPI = contract("openai", "chat_completions_subset.openapi.json")


def test_runtime_copy_equals_the_vendored_contract() -> None:
    expected = extract(json.loads(OPENAPI.read_text()))
    assert json.loads(RESPONSE_SCHEMA_PATH.read_text()) == expected, (
        "regenerate: python -m probes.contracts tests/contracts/openai/chat_completions_subset.openapi.json")


def test_runtime_copy_is_self_contained_and_accepts_the_vendored_examples() -> None:
    schema = response_schema()
    assert "$ref" not in json.dumps(schema) and "nullable" not in json.dumps(schema)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    # SOURCE.md: responses 3 and 4 omit the required ``refusal`` (an upstream inconsistency); 0 and 1 validate.
    for name in ("0_default.response.json", "1_image_input.response.json"):
        path = contract("openai", "examples", name)
        validator.validate(json.loads(path.read_text()))
