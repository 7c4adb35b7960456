"""``POST /v1/feedback``: one verdict per traced request, learned into the quality table.

The body is read as chat's is (:mod:`router_core.gateway.body_read`): within
``gateway.body_timeout_s`` (408), and at most :data:`FEEDBACK_MAX_BYTES` (413, at once when the
``Content-Length`` says so): a verdict is a few hundred bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

import orjson
from aiohttp import web
from pydantic import AwareDatetime, TypeAdapter, ValidationError

from router_core.decide.router import Router
from router_core.errors import InvalidRequest
from router_core.gateway.body_read import read_body, refusal_response
from router_core.gateway.errors import error_response
from router_core.gateway.hooks import TraceHooks
from router_core.gateway.verdicts import Verdicts
from router_core.metrics import GatewayMetrics
from router_core.resilience.router_modes import RouterModes
from router_core.state.quality import QualityTable
from schemas.config import RouteLensConfig
from schemas.feedback import Feedback
from schemas.trace import DecisionTrace

__all__ = ["FEEDBACK_MAX_BYTES", "FeedbackParts", "feedback"]

FEEDBACK_MAX_BYTES = 64 * 1024  # a verdict is a few hundred bytes; chat's 32 MiB would only let a client waste memory
_AWARE = TypeAdapter(AwareDatetime)


class FeedbackParts(Protocol):
    """What ``POST /v1/feedback`` reads and updates (the gateway has them)."""

    config: RouteLensConfig
    wall: Callable[[], datetime]
    classes: frozenset[str]
    verdicts: Verdicts
    hooks: TraceHooks
    metrics: GatewayMetrics
    router_modes: RouterModes
    quality: QualityTable
    router: Router


async def feedback(gw: FeedbackParts, request: web.Request) -> web.Response:
    """``POST /v1/feedback``: ``{request_id, correct, expected_class?, expected_model?, source?, ts?}``.

    One verdict per request id, for a request that has a trace: a second one (through any worker,
    see :mod:`router_core.gateway.verdicts`) is a 409 and is neither stored nor learned, an
    unknown id a 404. ``expected_class`` must be a configured class, ``expected_model`` a model of
    the fleet. A trace that another worker of ``serve --workers N`` has not delivered to the store
    yet is found through the hooks' ``lookup_elsewhere(request_id)`` (awaited only when
    ``lookup`` misses). Which ids have a verdict is kept in memory (and in the shared Redis), like
    what was learned from them: both start again after a restart; the stored feedback records
    stay, and the store is asked (``hooks.has_stored_verdict``) once the claims know none, so a
    verdict given before the restart still makes a second one a 409, written or still on its way
    (in the pipeline of the hooks or of the store; the verdicts the gateway's spool held at its
    start are claimed before it takes requests: :meth:`Verdicts.hold`). A store that cannot
    answer: accepted, see :meth:`Verdicts.stored_before`. The verdict is learned, by every worker,
    for the trace's ``selected_model`` and ``selected_instance``; the 202 body says what was learned
    (``learned``: model, instance, class, ``p_model``, ``p_instance``, ``divergent``).
    """
    raw = await read_body(request, gw.config.gateway.body_timeout_s, limit=FEEDBACK_MAX_BYTES)
    if not isinstance(raw, bytes):
        return refusal_response(raw)
    try:
        data = orjson.loads(raw)
        if not isinstance(data, dict):
            raise InvalidRequest("feedback must be a JSON object", code="invalid_request")
        if "correct" in data and not isinstance(data["correct"], bool):  # pydantic's lax mode reads "yes" as true
            return error_response(400, "invalid feedback: correct must be true or false (a JSON boolean)",
                                  param="correct", code="invalid_value")
        data.setdefault("ts", gw.wall().isoformat())
        item = Feedback.model_validate(data)
    except orjson.JSONDecodeError:
        return error_response(400, "request body is not valid JSON", code="invalid_json")
    except InvalidRequest as exc:
        return error_response(400, str(exc), param=exc.param, code=exc.code)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or _model_level_param(data)
        return error_response(400, f"invalid feedback: {first['msg']}", param=param, code="invalid_value")
    if item.expected_class is not None and item.expected_class not in gw.classes:
        return error_response(400, f"expected_class must be one of {', '.join(sorted(gw.classes))}",
                              param="expected_class", code="invalid_value")
    models = {spec.model for spec in gw.router.policy.fleet}  # as reloaded: the fleet that serves now
    if item.expected_model is not None and item.expected_model not in models:  # a typo would count as a misroute
        return error_response(400, f"expected_model must be a model of the fleet: {', '.join(sorted(models))}",
                              param="expected_model", code="invalid_value")
    if not await gw.verdicts.claim(item.request_id):  # here or through another worker
        return error_response(409, f"request '{item.request_id}' already has a verdict",
                              param="request_id", code="feedback_exists")
    trace: DecisionTrace | None = None
    try:
        trace = await asyncio.to_thread(gw.hooks.lookup, item.request_id)
        # not here nor stored: another worker's, not delivered yet (hooks.lookup_elsewhere: app.run.gateway_app)
        if trace is None:
            trace = await gw.hooks.lookup_elsewhere(item.request_id)
    finally:
        if trace is None:
            await gw.verdicts.release(item.request_id)
    if trace is None:
        return error_response(404, f"no trace for request_id '{item.request_id}'", param="request_id",
                              code="trace_not_found")
    if await gw.verdicts.stored_before(item.request_id, gw.hooks.has_stored_verdict):  # given before a restart
        # the claim stays: a later attempt is a 409 without asking the store again
        return error_response(409, f"request '{item.request_id}' already has a verdict (recorded before)",
                              param="request_id", code="feedback_exists")
    gw.metrics.record_feedback(item.correct)
    await asyncio.to_thread(gw.hooks.record_feedback, item)
    body: dict[str, object] = {"status": "accepted"}
    cls = item.expected_class or trace.intent
    model, instance = trace.selected_model, trace.selected_instance
    # What every replica learns (this one at once): the misroute share behind the router's safe mode, and how
    # often this model, and this instance of it, answers this class well.
    await gw.verdicts.learn(model if cls else None, instance, cls, item.correct)
    if model and cls:
        snap = gw.quality.snapshot()
        body["learned"] = {"model": model, "instance": instance, "class": cls,
                           "p_model": round(snap.models[(model, cls)], 4),
                           "p_instance": round(snap.estimate(instance or "", model, cls, 0.0), 4),
                           "divergent": instance is not None and snap.is_divergent(instance, cls)}
    return web.Response(status=202, body=orjson.dumps(body), content_type="application/json")


def _model_level_param(data: dict[str, object]) -> str | None:
    """The field of an error without a location (:class:`Feedback`'s model-level rule): ``ts`` when it has no zone."""
    try:
        _AWARE.validate_python(data.get("ts"))
    except ValidationError:
        return "ts"
    return None
