"""The gateway's operations routes as docs/http-api.md describes them, over real HTTP on 127.0.0.1.

Found by driving ``routelens serve`` with curl: closing a breaker of a scope that does not exist was a
404 "no cluster breaker named ..." (as if only the name were wrong), and the route's ``?by=`` was not
in ``/openapi.json``.
"""

from __future__ import annotations

import asyncio

from router_core.gateway.openapi import GATEWAY_OPERATIONS
from tests.router_core.gateway.gateway_kit import gateway_client
from tests.router_core.gateway.test_forwarding import reply


def test_an_unknown_breaker_scope_is_a_400_naming_the_scope() -> None:
    asyncio.run(_unknown_scope())


async def _unknown_scope() -> None:
    async with gateway_client({"a": reply(200), "b": reply(200)}) as (client, _):
        got = await client.post("/v1/router/breakers/cluster/a/close")
        body = await got.json()
        assert got.status == 400, body
        assert body["error"]["code"] == "invalid_parameter" and body["error"]["param"] == "scope"
        assert "instance, model, zone" in body["error"]["message"]
        missing = await client.post("/v1/router/breakers/instance/zz/close")  # a known scope, no such name
        assert missing.status == 404 and (await missing.json())["error"]["code"] == "not_found"
        closed = await client.post("/v1/router/breakers/instance/a/close?by=ops")
        assert closed.status == 200 and (await closed.json())["state"] == "closed"


def test_the_breaker_route_describes_its_by_parameter_and_its_400() -> None:
    op = next(o for o in GATEWAY_OPERATIONS if o.path == "/v1/router/breakers/{scope}/{name}/close")
    assert op.query is not None and "by" in op.query.model_fields
    assert 400 in op.answers and 404 in op.answers


def test_the_operator_named_twice_is_a_400_naming_by() -> None:
    asyncio.run(_by_twice())


async def _by_twice() -> None:
    async with gateway_client({"a": reply(200), "b": reply(200)}) as (client, _):
        twice = await client.post("/v1/router/breakers/instance/a/close?by=ops&by=oncall")  # before: "ops", silently
        assert twice.status == 400
        assert (await twice.json())["error"] == {"message": "parameter `by` is given twice",
                                                 "type": "invalid_request_error", "param": "by",
                                                 "code": "invalid_parameter"}
        once = await client.post("/v1/router/breakers/instance/a/close?by=ops")
        assert once.status == 200 and (await once.json())["state"] == "closed"
