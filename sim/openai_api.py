"""The OpenAI chat-completions request as an OpenAI-compatible server checks it, and its 4xx errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
from aiohttp import web

from schemas.chat_text import MalformedContent, content_text
from schemas.hashing import normalize_query
from sim.corpus import estimate_tokens, topic_of

__all__ = ["ApiError", "ChatRequest", "api_errors", "json_response", "parse_chat_request"]

# aiohttp's own refusals, with the ``code`` each gets (413's is the gateway's for the same refusal)
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


@dataclass(frozen=True, slots=True)
class ApiError:
    """An OpenAI-style error answer (4xx by default, 429/500 for faults); messages never quote the request."""

    message: str
    param: str | None
    code: str | None
    status: int = 400
    type: str = "invalid_request_error"

    def response(self, headers: dict[str, str] | None = None) -> web.Response:
        """Render as ``{"error": {message, type, param, code}}``."""
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return json_response({"error": error}, status=self.status, headers=headers)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """The parts of a chat request the simulator acts on."""

    turns: tuple[tuple[str, str], ...]
    prompt_tokens: int
    max_tokens: int | None
    stream: bool
    include_usage: bool

    @property
    def topic(self) -> str:
        """What the answer is about: the latest user message with ground truth, else the latest one.

        A session's follow-up turns ("please go on") thus keep answering the ticket of its first turn.
        """
        users = [text for role, text in self.turns if role == "user"]
        return topic_of(users) if users else self.turns[-1][1]

    @property
    def key(self) -> str:
        """Normalised content of the whole conversation; equal keys get equal answers."""
        return normalize_query("\n".join(f"{role}: {text}" for role, text in self.turns))


def _text_of(content: object) -> str | None:
    """The text of a message's content (the gateway's rule), or None when its shape is wrong."""
    try:
        return content_text(content)[0]
    except MalformedContent:
        return None


def parse_chat_request(body: object, context_window: int) -> ChatRequest | ApiError:
    """Check a decoded chat-completions body the way an OpenAI-compatible server does.

    Args:
        body: The decoded JSON body.
        context_window: Most prompt tokens the instance accepts.

    Returns:
        The request, or the 400 error to answer with.
    """
    if not isinstance(body, dict):
        return ApiError("The request body must be a JSON object.", None, "invalid_type")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        code = "missing_required_parameter" if messages is None else "invalid_type"
        return ApiError("'messages' must be a non-empty array of message objects.", "messages", code)
    turns: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(role, str) or role not in _ROLES:
            return ApiError(f"messages[{i}] must be an object with a valid 'role'.", f"messages[{i}].role",
                            "invalid_value")
        text = _text_of(message.get("content"))
        if text is None:
            return ApiError(f"messages[{i}].content must be a string or an array of content parts.",
                            f"messages[{i}].content", "invalid_type")
        turns.append((role, text))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
        return ApiError("'max_tokens' must be a positive integer.", "max_tokens", "invalid_value")
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        return ApiError("'stream' must be a boolean.", "stream", "invalid_type")
    prompt_tokens = sum(estimate_tokens(text) for _, text in turns)
    if prompt_tokens > context_window:
        return ApiError(f"This model's maximum context length is {context_window} tokens. However, your "
                        f"messages resulted in {prompt_tokens} tokens. Please reduce the length of the messages.",
                        "messages", "context_length_exceeded")
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return ChatRequest(tuple(turns), prompt_tokens, max_tokens, stream, include_usage)


def json_response(obj: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """Serialise ``obj`` with orjson into a JSON response."""
    return web.Response(status=status, body=orjson.dumps(obj), content_type="application/json", headers=headers)


@web.middleware
async def api_errors(request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """Answer aiohttp's own HTTP errors (404, 405, 413...) as OpenAI-style JSON, as vLLM answers every error.

    Left as aiohttp renders them they are text/plain, which no client of an OpenAI-compatible
    server can read as an error object.
    """
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind = "invalid_request_error" if exc.status < 500 else "server_error"
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return ApiError(exc.text or exc.reason, None, _HTTP_CODES.get(exc.status), status=exc.status,
                        type=kind).response(headers=allow)
