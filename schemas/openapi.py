"""OpenAPI 3.1 descriptions built from the pydantic models that validate the bodies and parameters.

A server lists its routes as :class:`Operation` values, each naming the models its handler
validates with (the request body, the query parameters, the path parameters) and the model of each
answer; :func:`openapi_document` turns them into one document whose schemas are those models' own
JSON Schemas (pydantic's, which OpenAPI 3.1 takes as they are), so the description cannot drift
from what the server accepts. Nothing here is written beside a model: a route without a model for
its body says only its content type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

__all__ = ["Answer", "Operation", "openapi_document"]

REF = "#/components/schemas/{model}"


@dataclass(frozen=True, slots=True)
class Answer:
    """One response of an operation: its model (JSON) or its content type with no model (``text/plain``...)."""

    description: str
    model: type[BaseModel] | None = None
    content_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class Operation:
    """One route: what it takes and what it answers.

    Attributes:
        body: The model its handler validates the JSON body with (None: no JSON body).
        query: A model whose fields are the query parameters (the handler validates with it).
        path_params: A model whose fields are the path parameters.
        answers: HTTP status -> :class:`Answer`.
        security: Names of the security schemes that guard it (any one of them suffices).
    """

    method: str
    path: str
    summary: str
    answers: Mapping[int, Answer]
    tag: str = "gateway"
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    path_params: type[BaseModel] | None = None
    security: tuple[str, ...] = ()


def _params(model: type[BaseModel] | None, where: str) -> list[dict[str, Any]]:
    if model is None:
        return []
    schema = model.model_json_schema(ref_template=REF)
    required = set(schema.get("required", ()))
    out = []
    for name, prop in schema.get("properties", {}).items():
        param: dict[str, Any] = {"name": name, "in": where, "required": where == "path" or name in required,
                                 "schema": {k: v for k, v in prop.items() if k not in ("title", "description")}}
        if "description" in prop:
            param["description"] = prop["description"]
        out.append(param)
    return out


def _free(content_type: str) -> dict[str, Any]:
    """The schema of a body without a model: any JSON value, or text."""
    return {} if content_type == "application/json" else {"type": "string"}


def openapi_document(title: str, version: str, operations: Iterable[Operation], *, description: str = "",
                     security_schemes: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations``; every model's schema under ``components/schemas``."""
    ops = list(operations)
    wanted: dict[tuple[type[BaseModel], Literal["validation", "serialization"]], None] = {}
    for op in ops:  # what a route takes is described as validated, what it answers as serialized
        for m in (op.body, op.query, op.path_params):
            if m is not None:
                wanted[(m, "validation")] = None
        for a in op.answers.values():
            if a.model is not None:
                wanted[(a.model, "serialization")] = None
    keys, defs = models_json_schema(list(wanted), ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for op in ops:
        name = op.path.replace("/", "_").replace("{", "").replace("}", "")
        entry: dict[str, Any] = {"summary": op.summary, "tags": [op.tag], "operationId": f"{op.method.lower()}{name}"}
        params = _params(op.path_params, "path") + _params(op.query, "query")
        if params:
            entry["parameters"] = params
        if op.body is not None:
            entry["requestBody"] = {"required": True,
                                    "content": {"application/json": {"schema": keys[(op.body, "validation")]}}}
        entry["responses"] = {
            str(status): {"description": a.description, "content": {a.content_type: {
                "schema": keys[(a.model, "serialization")] if a.model is not None else _free(a.content_type)}}}
            for status, a in sorted(op.answers.items())}
        if op.security:
            entry["security"] = [{name: []} for name in op.security]
        paths.setdefault(op.path, {})[op.method.lower()] = entry
    doc: dict[str, Any] = {"openapi": "3.1.0", "info": {"title": title, "version": version, "description": description},
                           "paths": paths, "components": {"schemas": defs.get("$defs", {})}}
    if security_schemes:
        doc["components"]["securitySchemes"] = dict(security_schemes)
    return doc
