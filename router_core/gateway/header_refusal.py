"""The trace of a chat request refused for a header that is not UTF-8, made as the runner makes every refusal's.

``errors_middleware`` refuses such a request before any route runs (see
:mod:`router_core.gateway.header_check`). On ``POST /v1/chat/completions`` every other refusal
before routing (an odd ``X-Request-Id``, the client throttle's 429, the prefilter's 400) leaves a
trace, counted in ``routelens_gateway_requests_total``; this one does too, through the runner's
own refusal, so it is built the same way (a gateway id unless the client's ``X-Request-Id`` is
valid, the features known so far: none, since the body is not read). Only for a caller the
gateway's keys admit: the key check comes later, and an unknown caller must not write traces.
"""

from __future__ import annotations

from collections.abc import Collection

from aiohttp import web

from router_core.errors import InvalidRequest
from router_core.gateway.auth import bearer_ok
from router_core.gateway.chat import Call, ChatRunner
from router_core.gateway.errors import status_of
from router_core.gateway.header_check import is_utf8

__all__ = ["ChatHeaderRefusal"]


class ChatHeaderRefusal:
    """A :data:`~router_core.gateway.header_check.HEADER_REFUSAL` for the chat route.

    Args:
        chat: The runner whose refusals are traced.
        route: The chat route (other routes' refusals are left untraced, as their others are).
        keys: The gateway's API keys (None: open, every caller admitted).
    """

    def __init__(self, chat: ChatRunner, route: web.AbstractRoute, keys: Collection[str] | None) -> None:
        self.chat = chat
        self.route = route
        self.keys = keys

    def __call__(self, request: web.Request, exc: InvalidRequest) -> web.StreamResponse | None:
        """The traced refusal of ``exc``; None: the request is not the chat route's or its caller is not admitted."""
        if request.match_info.route is not self.route:
            return None
        if self.keys is not None:
            auth = request.headers.get("Authorization")
            if auth is None or not is_utf8(auth) or not bearer_ok(auth, self.keys):
                return None
        chat = self.chat
        request_id, _ = chat.request_ids.of(request.headers.get("X-Request-Id", ""))  # a hostile id: a new one
        call = Call(request, request_id, chat.perf(), trace=chat.trace_ids.context(request.headers))
        # the runner's own refusal (private to it), so this trace is every refusal's kind of trace
        status, code = status_of(exc)
        return chat.refuse(call, status, str(exc), code, exc.param)
