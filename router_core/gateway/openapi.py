"""``GET /openapi.json``: the gateway's routes described from the models that validate them.

The chat route's body is :class:`schemas.openai_chat.ChatCompletionRequest` (the screen stage
validates every request with it), feedback is :class:`schemas.feedback.Feedback`; answers are the
models the routes serialize, or their content type where a route answers free-form JSON (the live
state views) or text (``/metrics``). A server that mounts more routes (the store's query API,
``app/run/gateway_app.py``) adds their operations to :attr:`OpenApi.operations` before it starts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import orjson
from aiohttp import web
from pydantic import BaseModel, Field

from schemas.feedback import Feedback
from schemas.openai_chat import ChatCompletion, ChatCompletionRequest, ErrorResponse, ModelCard, ModelList
from schemas.openapi import Answer, Operation, openapi_document

__all__ = ["GATEWAY_OPERATIONS", "OpenApi"]

_BAD = Answer("The request breaks the contract (the error names the parameter)", ErrorResponse)
_KEY = Answer("A gateway key is required (gateway.api_keys_env)", ErrorResponse)
_JSON = Answer("A JSON view")


class _BreakerPath(BaseModel):
    scope: Literal["instance", "model", "zone"]
    name: str = Field(min_length=1)


class _BreakerQuery(BaseModel):
    by: str | None = Field(None, description="Who closes it, named in the breaker's event (64 characters kept).")


class _ModelPath(BaseModel):
    model: str = Field(min_length=1)


class FeedbackAccepted(BaseModel):
    """``POST /v1/feedback``'s 202: what every replica learned from the verdict (when the trace has a class)."""

    status: Literal["accepted"]
    learned: dict[str, object] | None = None


_LATE = Answer("The body did not arrive within gateway.body_timeout_s of its headers", ErrorResponse)


def _guarded(*ops: Operation) -> tuple[Operation, ...]:
    return tuple(replace(op, answers={**op.answers, 401: _KEY}, security=("gateway_key",)) for op in ops)


# Any route: a request aiohttp cannot parse (invalid_http) or with a header that is not UTF-8 (invalid_header).
_MALFORMED = Answer("The request is not well-formed HTTP/1.1, or a header is not UTF-8", ErrorResponse)


def _any_request(*ops: Operation) -> tuple[Operation, ...]:
    return tuple(op if 400 in op.answers else replace(op, answers={400: _MALFORMED, **op.answers}) for op in ops)


GATEWAY_OPERATIONS: tuple[Operation, ...] = _any_request(
    *_guarded(
        Operation("POST", "/v1/chat/completions", "Route one chat-completions request (OpenAI-compatible)", {
            200: Answer("The instance's answer (a stream is text/event-stream)", ChatCompletion),
            400: _BAD, 404: Answer("The model is not served", ErrorResponse),
            408: _LATE, 413: Answer("The body is too large", ErrorResponse),
            415: Answer("The body is compressed (Content-Encoding): bodies are read as sent", ErrorResponse),
            429: Answer("Throttled (Retry-After says when to come back)", ErrorResponse),
            502: Answer("No instance could answer", ErrorResponse),
            503: Answer("No instance is feasible", ErrorResponse)}, body=ChatCompletionRequest),
        Operation("POST", "/v1/feedback", "A verdict on one routed request", {
            202: Answer("Accepted, and learned by every worker", FeedbackAccepted), 400: _BAD, 408: _LATE,
            413: Answer("The body is over 64 KiB", ErrorResponse),
            404: Answer("No trace for that request_id", ErrorResponse),
            409: Answer("The request already has a verdict", ErrorResponse)}, body=Feedback),
        Operation("POST", "/v1/router/decide", "Decide a request as the gateway would, without sending it", {
            200: Answer("The decision and its trace"), 400: _BAD, 408: _LATE,
            404: Answer("The model is not served", ErrorResponse),
            413: Answer("The body is too large", ErrorResponse)}, body=ChatCompletionRequest),
        Operation("GET", "/v1/models", "The fleet's models, and auto", {200: Answer("OpenAI's model list", ModelList)}),
        Operation("GET", "/v1/models/{model}", "One model of the fleet, or auto", {
            200: Answer("OpenAI's model card", ModelCard), 404: Answer("The model is not served", ErrorResponse)},
            path_params=_ModelPath),
        Operation("GET", "/v1/router/state", "The live state: snapshots, modes, budgets, scraping", {200: _JSON}),
        Operation("GET", "/v1/alerts", "Active alerts", {200: _JSON}),
        Operation("GET", "/v1/probes/verdicts", "The prober's verdicts the router follows", {
            200: _JSON, 404: Answer("No prober", ErrorResponse)}),
        Operation("POST", "/v1/router/breakers/{scope}/{name}/close", "Close one breaker by hand", {
            200: _JSON, 400: Answer("The scope is not instance, model or zone", ErrorResponse),
            404: Answer("No such breaker", ErrorResponse)}, path_params=_BreakerPath, query=_BreakerQuery),
    ),
    Operation("GET", "/health", "Liveness and readiness", {200: _JSON, 503: Answer("Not ready, and why")}),
    Operation("GET", "/metrics", "Prometheus exposition", {200: Answer("Metrics", content_type="text/plain")}),
)


class OpenApi:
    """The description a server publishes, built once on first request from its operations."""

    def __init__(self, title: str, version: str, operations: tuple[Operation, ...]) -> None:
        self.title = title
        self.version = version
        self.operations = list(operations)
        self._body: bytes | None = None

    def document(self) -> dict[str, object]:
        """The OpenAPI 3.1 document."""
        schemes = {"gateway_key": {"type": "http", "scheme": "bearer"},
                   "read_token": {"type": "http", "scheme": "bearer"},
                   "intake_token": {"type": "http", "scheme": "bearer"}}
        return openapi_document(self.title, self.version, self.operations, security_schemes=schemes,
                                description="Generated from the pydantic models that validate each route.")

    async def handler(self, _: web.Request) -> web.Response:
        """``GET /openapi.json``."""
        if self._body is None:
            self._body = orjson.dumps(self.document())
        return web.Response(body=self._body, content_type="application/json")

    def add_route(self, app: web.Application) -> None:
        """Serve the document at ``/openapi.json``."""
        app.router.add_get("/openapi.json", self.handler)
