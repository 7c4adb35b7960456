"""Stage 1, screen: the request's body, the client and shedding buckets (429), the prefilter and the contract (400).

The body is validated against :class:`schemas.openai_chat.ChatCompletionRequest` (the model the
gateway's OpenAPI description is generated from) once the buckets let it through.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from router_core.gateway.policy_gate import PolicyGate
from router_core.resilience.prefilter import Refusal
from schemas.openai_chat import ChatCompletionRequest

__all__ = ["contract_refusal", "param_of", "screen"]

_VALIDATE = ChatCompletionRequest.__pydantic_validator__.validate_python
# pydantic names the member of a union it tried in an error's location (``str``, ``list[ContentPart]``); fields never
_UNION_TAG = re.compile(r"^(str|int|float|bool|none|.*\[.*\])$")


def param_of(loc: tuple[int | str, ...]) -> str | None:
    """A validation error's location as OpenAI names a parameter: ``messages[0].content``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or None


async def screen(http: web.Request, policy: PolicyGate) -> tuple[Any, Refusal | None]:
    """The parsed body, and the refusal of a request that goes no further (None: it goes on).

    Raises:
        orjson.JSONDecodeError: The body is not JSON.
        web.HTTPRequestEntityTooLarge: The body is over the server's limit.
    """
    body = orjson.loads(await http.read())
    if not isinstance(body, dict):
        return body, None  # analysis refuses it with the contract's reason
    refusal = await policy.screen(body, http.headers, http.remote)
    return body, refusal or contract_refusal(body)


def contract_refusal(body: dict[str, Any]) -> Refusal | None:
    """A 400 naming the first place ``body`` breaks the chat-completions contract; None when it holds."""
    try:
        _VALIDATE(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = param_of(tuple(p for p in first["loc"] if not (isinstance(p, str) and _UNION_TAG.match(p))))
        return Refusal(400, f"{where or 'body'}: {first['msg']}", "invalid_request", where)
    return None
