"""Fixtures for the simulator tests: real loopback servers and the OpenAI contract schemas."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from aiohttp import web
from jsonschema import Draft202012Validator

from schemas.config import SimModelProfile, SimSettings
from schemas.fleet import InstanceSpec
from tests.contracts import contract
from tests.probes.conftest import serving

OPENAI_CONTRACT = contract("openai", "chat_completions_subset.openapi.json")

Serve = Callable[[web.Application], AbstractAsyncContextManager[str]]
SPEC_LABELS = {"model_name": "sim-model", "engine": "0"}  # the labels of every series the ``spec`` instance exports


def _rewrite_nullable(node: Any) -> Any:
    """OpenAPI 3.0 ``nullable: true`` -> JSON Schema ``anyOf [..., null]`` (the trap in SOURCES.md)."""
    if isinstance(node, list):
        return [_rewrite_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _rewrite_nullable(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


@pytest.fixture(scope="session")
def openai_schema() -> Callable[[str], Draft202012Validator]:
    """Return a factory: component name -> validator, with ``nullable`` rewritten."""
    components = _rewrite_nullable(copy.deepcopy(json.loads(OPENAI_CONTRACT.read_text())["components"]))

    def validator(name: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": components})

    return validator


@pytest.fixture
def serve() -> Serve:
    """Serve an aiohttp app on a free loopback port: ``async with serve(app) as base_url``."""

    return serving


@pytest.fixture
def spec() -> InstanceSpec:
    return InstanceSpec(id="sim-a", model=SPEC_LABELS["model_name"], url="http://127.0.0.1:0", context_window=512)


@pytest.fixture
def profile() -> SimModelProfile:
    return SimModelProfile(max_concurrency=2, kv_tokens=4096)


@pytest.fixture
def fast() -> SimSettings:
    """Settings without any sleeping, for tests that do not look at occupancy."""
    return SimSettings(zero_delay=True, seed=11)
