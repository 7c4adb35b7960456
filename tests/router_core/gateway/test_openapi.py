"""``GET /openapi.json``: every route the gateway serves is described, from the models that validate it."""

from __future__ import annotations

import asyncio
from typing import Any

import schemathesis

from ingest.http_api.openapi import STORE_OPERATIONS
from router_core.gateway.openapi import GATEWAY_OPERATIONS, OpenApi
from schemas.openai_chat import ChatCompletionRequest
from tests.router_core.gateway.gateway_kit import gateway_client


async def _ok(_: Any) -> Any:
    from aiohttp import web

    return web.json_response({})


def test_every_route_the_gateway_serves_is_described_and_the_document_loads() -> None:
    async def main() -> tuple[dict[str, Any], set[tuple[str, str]]]:
        async with gateway_client({"a": _ok}) as (client, _):
            resp = await client.get("/openapi.json")
            assert resp.status == 200 and resp.content_type == "application/json"
            doc = await resp.json()
            served = {(r.method.lower(), r.resource.canonical) for r in client.app.router.routes()  # type: ignore[union-attr]
                      if r.method != "HEAD" and r.resource is not None}
            return doc, served

    doc, served = asyncio.run(main())
    described = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert doc["openapi"] == "3.1.0" and served - {("get", "/openapi.json")} == described
    body = doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ChatCompletionRequest"}
    assert doc["components"]["schemas"]["ChatCompletionRequest"]["properties"].keys() == \
        ChatCompletionRequest.model_json_schema()["properties"].keys()
    chat = doc["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert {"400", "401", "404", "408", "413", "415", "429", "502", "503"} <= chat.keys()  # test_body_read: 408 and 413
    for path in ("/v1/feedback", "/v1/router/decide"):  # their bodies are read as chat's (test_audit_api_body_read)
        assert {"408", "413"} <= doc["paths"][path]["post"]["responses"].keys()
    schema = schemathesis.openapi.from_dict(doc)  # loads as an OpenAPI 3.1 document
    assert len(list(schema.get_all_operations())) == len(described)


def test_the_store_s_operations_join_without_clashing() -> None:
    doc = OpenApi("t", "1", (*GATEWAY_OPERATIONS, *STORE_OPERATIONS)).document()
    n = sum(len(ops) for ops in doc["paths"].values())  # type: ignore[union-attr]
    assert n == len(GATEWAY_OPERATIONS) + len(STORE_OPERATIONS)
    assert set(doc["paths"]["/v1/traces"]) == {"get", "post"}  # type: ignore[index]
    search = doc["paths"]["/v1/traces"]["get"]["parameters"]  # type: ignore[index]
    assert {"limit", "cursor", "otel_trace_id", "instance", "start"} <= {p["name"] for p in search}
