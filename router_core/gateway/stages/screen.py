"""Stage 1, screen: the request's body, the client and shedding buckets (429), the prefilter and the contract (400).

The body is validated against :class:`schemas.openai_chat.ChatCompletionRequest` (the model the
gateway's OpenAPI description is generated from) once the buckets let it through. The model is strict:
a value of the wrong JSON type (``"stream": "false"``, ``"n": "2"``, ``"max_tokens": true``) is the 400,
so the stages after this one read ``stream`` or ``include_usage`` as the booleans they are.

Reading the body is where a client can hold the gateway: a ``Content-Length`` it never completes, or
one over the limit that it starts to send. aiohttp bounds neither (its server has no read timeout and
checks ``client_max_size`` only as the bytes arrive), so :func:`screen` reads a body still on its way
with :func:`~router_core.gateway.body_read.read_body`, every route's read: an announced size over the
limit is refused before reading (413), and the read is bounded by ``gateway.body_timeout_s`` (408).
Both cost only the request whose body is still on its way: an ordinary body has arrived with its
headers, and is read without a timer.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from router_core.gateway.body_read import BodyTimeout, read_body
from router_core.gateway.policy_gate import PolicyGate
from router_core.resilience.prefilter import Refusal
from schemas.openai_chat import ChatCompletionRequest

__all__ = ["BodyTimeout", "contract_refusal", "param_of", "screen"]

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
        web.HTTPRequestEntityTooLarge: The body is, or is announced, over the server's limit.
    """
    if http.content.is_eof():  # the ordinary request: the whole body came with the headers
        raw = await http.read()
    else:
        got = await read_body(http, policy.config.gateway.body_timeout_s)
        if isinstance(got, Refusal):
            return None, got
        raw = got
    body = orjson.loads(raw)
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
