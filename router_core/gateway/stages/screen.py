"""Stage 1, screen: the request's body, then the client and shedding buckets (429) and the prefilter (400)."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from router_core.gateway.policy_gate import PolicyGate
from router_core.resilience.prefilter import Refusal

__all__ = ["screen"]


async def screen(http: web.Request, policy: PolicyGate) -> tuple[Any, Refusal | None]:
    """The parsed body, and the refusal of a request that goes no further (None: it goes on).

    Raises:
        orjson.JSONDecodeError: The body is not JSON.
        web.HTTPRequestEntityTooLarge: The body is over the server's limit.
    """
    body = orjson.loads(await http.read())
    if not isinstance(body, dict):
        return body, None  # analysis refuses it with the contract's reason
    return body, await policy.screen(body, http.headers, http.remote)
