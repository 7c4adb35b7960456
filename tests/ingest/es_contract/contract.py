"""Checks HTTP requests and responses against the vendored Elasticsearch OpenAPI contract (tests/contracts).

Every request the official client sends is matched to an operation of the OpenAPI file (method and
path template), its query parameters are checked against the parameter schemas (unknown ones are
violations), and its body against the request-body schema (for ``_bulk`` each NDJSON line, in
action/source pairs). Responses are checked against the documented 200 schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import quote

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from tests.contracts import contract

CONTRACTS = contract("elasticsearch")
OPENAPI = CONTRACTS / "es_serverless_openapi_subset_bulk_index_get_search_template.json"
_URI = "urn:es-openapi"
_SHARED: list[Contract] = []
# The specification writes unions as ``oneOf`` even where the alternatives overlap (``string`` and
# ``nullable string``, an operation and ``{"type": "object"}``): read them as ``anyOf``, as
# Elasticsearch's own clients do, or every valid document would fail.
# OpenAPI 3.0 ``nullable: true`` is not JSON Schema: honour it where ``type`` is checked.
_TYPE = jsonschema.Draft4Validator.VALIDATORS["type"]


def _type(validator: Any, types: Any, instance: Any, schema: dict[str, Any]) -> Any:
    if instance is None and schema.get("nullable"):
        return
    yield from _TYPE(validator, types, instance, schema)


# The index templates' mappings run every property through a union of ~50 property types, each a
# ``$ref``: about a million schema descents (over 10 s) per template. The same (reference, value)
# pairs recur across properties, templates and tests, so a pair found valid once is not checked
# again (a failure is always checked anew, so its errors are reported as they are).
_REF = jsonschema.Draft4Validator.VALIDATORS["$ref"]
_VALID_REFS: set[tuple[str, str]] = set()


def _ref(validator: Any, ref: str, instance: Any, schema: dict[str, Any]) -> Any:
    if not isinstance(instance, (dict, list)):
        yield from _REF(validator, ref, instance, schema)
        return
    key = (ref, json.dumps(instance, sort_keys=True, default=str))
    if key in _VALID_REFS:
        return
    failed = False
    for error in _REF(validator, ref, instance, schema):
        failed = True
        yield error
    if not failed:
        _VALID_REFS.add(key)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft4Validator, {"oneOf": jsonschema.Draft4Validator.VALIDATORS["anyOf"], "type": _type, "$ref": _ref}
)


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass
class Operation:
    method: str
    template: str
    regex: re.Pattern[str]
    spec: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.spec.get("operationId", f"{self.method} {self.template}"))


@dataclass
class Contract:
    doc: dict[str, Any] = field(default_factory=lambda: json.loads(OPENAPI.read_text(encoding="utf-8")))

    @classmethod
    def shared(cls) -> Contract:
        """One parsed contract per test session (it is large and never changes)."""
        if _SHARED:
            return _SHARED[0]
        _SHARED.append(cls())
        return _SHARED[0]

    @cached_property
    def registry(self) -> Registry:
        return Registry().with_resource(_URI, Resource.from_contents(self.doc, default_specification=DRAFT4))

    @cached_property
    def operations(self) -> list[Operation]:
        ops = []
        for template, item in self.doc["paths"].items():
            regex = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")
            for method, spec in item.items():
                ops.append(Operation(method.upper(), template, regex, spec))
        # literal paths (/_bulk) before templated ones (/{index}/_doc)
        return sorted(ops, key=lambda o: o.template.count("{"))

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.doc
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def match(self, method: str, path: str) -> Operation | None:
        for op in self.operations:
            if op.method == method and op.regex.match(quote(path, safe="/{}")):
                return op
        return None

    def _validator(self, pointer: str) -> Any:
        cache = self.__dict__.setdefault("_validators", {})
        if pointer not in cache:
            cache[pointer] = _Validator({"$ref": f"{_URI}#/{pointer}"}, registry=self.registry)
        return cache[pointer]

    def _validate(self, instance: Any, pointer: str) -> list[str]:
        key = (pointer, json.dumps(instance, sort_keys=True, default=str))
        memo = self.__dict__.setdefault("_memo", {})
        if key in memo:  # index templates are sent again and again: check each body once
            return list(memo[key])
        validator = self._validator(pointer)
        found = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}"
                 for e in validator.iter_errors(instance)]
        if len(key[1]) > 2_000:
            memo[key] = found
        return found

    def check_request(self, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[Operation | None,
                                                                                                list[str]]:
        op = self.match(method, path)
        if op is None:
            return None, [f"{method} {path} is not an operation of the contract"]
        problems = []
        params = {}
        for p in op.spec.get("parameters", []):
            p = self.resolve(p)
            params[(p["in"], p["name"])] = p
        for name, value in query.items():
            spec = params.get(("query", name))
            if spec is None:
                problems.append(f"query parameter {name!r} is not documented for {op.name}")
                continue
            problems += [f"?{name}={value}: {m}" for m in self._check_param(value, spec.get("schema", {}))]
        rb = op.spec.get("requestBody")
        if body.strip():
            if rb is None:
                problems.append(f"{op.name} takes no body")
            else:
                problems += self._check_body(op, body)
        elif rb is not None and self.resolve(rb).get("required"):
            problems.append(f"{op.name} requires a body")
        return op, problems

    def _check_param(self, raw: str, schema: dict[str, Any]) -> list[str]:
        schema = self.resolve(schema)
        kind = schema.get("type")
        if kind == "boolean" and raw not in ("true", "false"):
            return ["not a boolean"]
        if kind == "number":
            try:
                float(raw)
            except ValueError:
                return ["not a number"]
        return []

    def _body_pointer(self, op: Operation) -> str:
        rb = op.spec["requestBody"]
        base = rb["$ref"].lstrip("#/") if "$ref" in rb else _pointer("paths", op.template, op.method.lower(),
                                                                       "requestBody")
        return f"{base}/content/application~1json/schema"

    def _check_body(self, op: Operation, body: bytes) -> list[str]:
        pointer = self._body_pointer(op)
        if op.template.endswith("_bulk"):
            lines = [ln for ln in body.split(b"\n") if ln.strip()]
            try:
                items = [json.loads(ln) for ln in lines]
            except json.JSONDecodeError as exc:
                return [f"bulk body is not NDJSON: {exc}"]
            problems = self._validate(items, pointer)
            i = 0
            while i < len(items):
                action = items[i]
                if not (isinstance(action, dict) and len(action) == 1 and next(iter(action)) in
                        ("index", "create", "update", "delete")):
                    problems.append(f"bulk line {i + 1} is not an action")
                    break
                i += 1 if "delete" in action else 2
            if i != len(items):
                problems.append("bulk body ends with an action without its source")
            return problems
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            return [f"body is not JSON: {exc}"]
        return self._validate(data, pointer)

    def check_response(self, op: Operation, status: int, data: Any) -> list[str]:
        resp = op.spec["responses"].get(str(status))
        if resp is None:
            return []
        ref = resp.get("$ref")
        base = ref.lstrip("#/") if ref else _pointer("paths", op.template, op.method.lower(), "responses", str(status))
        content = self.resolve(resp).get("content", {})
        if "application/json" not in content:
            return []
        return self._validate(data, f"{base}/content/application~1json/schema")

    def example(self, name: str) -> Any:
        """Return the parsed value of a response example under spec_examples/."""
        import yaml

        raw = yaml.safe_load((CONTRACTS / "spec_examples" / name).read_text(encoding="utf-8"))["value"]
        return json.loads(raw) if isinstance(raw, str) else raw
