"""OpenAI's ``CreateChatCompletionResponse`` JSON Schema as the syntax probe reads it at run time.

``chat_completion_response.schema.json`` is extracted from the vendored OpenAPI file
(``tests/contracts/openai/chat_completions_subset.openapi.json``) by :func:`extract`: every
``$ref`` inlined and OpenAPI 3.0's ``nullable: true`` rewritten as ``anyOf [..., null]``. A test
checks the file equals what :func:`extract` yields, so the two cannot drift. Regenerate with
``python -m probes.contracts tests/contracts/openai/chat_completions_subset.openapi.json``.

The syntax probe judges answers by :func:`probe_schema`: that schema with one requirement
relaxed, ``choices[].message.refusal``. OpenAI marks it required, yet its own tool-call and
logprobs examples omit it and many OpenAI-compatible servers (hosted providers among them) never
send it; an absent ``refusal`` is read as null. Everything else is checked as the contract says.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["RESPONSE_SCHEMA_PATH", "extract", "probe_schema", "response_schema", "write_response_schema"]

RESPONSE_SCHEMA_PATH = Path(__file__).resolve().parent / "chat_completion_response.schema.json"
_COMPONENT = "CreateChatCompletionResponse"


def _inline(node: Any, components: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, components, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            raise ValueError(f"recursive $ref {name} via {' -> '.join(seen)}")
        return _inline(components[name], components, (*seen, name))
    out = {key: _inline(value, components, seen) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


def extract(openapi: dict[str, Any], component: str = _COMPONENT) -> dict[str, Any]:
    """Return ``component`` of an OpenAPI document as a self-contained JSON Schema (2020-12)."""
    components = openapi["components"]["schemas"]
    body = _inline(components[component], components, (component,))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": component, **body}


@cache
def response_schema() -> dict[str, Any]:
    """The packaged runtime copy of ``CreateChatCompletionResponse``."""
    loaded: dict[str, Any] = json.loads(RESPONSE_SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


@cache
def probe_schema() -> dict[str, Any]:
    """The schema the syntax probe validates against: :func:`response_schema` with ``message.refusal`` optional."""
    schema = copy.deepcopy(response_schema())
    message = schema["properties"]["choices"]["items"]["properties"]["message"]
    message["required"] = [name for name in message["required"] if name != "refusal"]
    return schema


def write_response_schema(argv: list[str]) -> int:
    """Regenerate the runtime copy from the OpenAPI file ``argv[0]``."""
    openapi = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    RESPONSE_SCHEMA_PATH.write_text(json.dumps(extract(openapi), indent=1, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
    return 0
