"""``POST /v1/router/decide``: the decision and trace a request would get, nothing forwarded or stored.

The body is a chat-completions request (decided under the live policy), or
``{"request": {...}, "policy": "<policy file text>", "policy_format": "yaml" | "dsl"}`` to try a
policy before rolling it out. The answer is ``{"decision": {...}, "trace": {...}}``; the trace is
the one the request would be stored under, with the query only as its hash.

It runs the chat route's own stages (:mod:`router_core.gateway.stages`): the prefilter and the
contract (their 400s), analysis and policy, then admit's context, so the router's mode, the
budgets, the session's binding and the breakers weigh as they would, and an input no candidate
holds, an attachment no model accepts or an ``x-routelens-arm`` that names no arm is the chat
route's 400; its body is read as chat's (:mod:`router_core.gateway.body_read`: 408, 413). It
changes nothing: no throttle or client-bucket token is taken, the session is not bound (its
binding is read, or the instance it would be placed on), the mode is not ticked and takes no
round-robin turn, no spend or decision time is counted. No experiment arm is drawn: the live
base router decides.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

import orjson
from aiohttp import web

from router_core.decide.analysis import analyse_request
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import Router
from router_core.errors import InvalidRequest, PolicyError, UnknownModel
from router_core.experiments import Experiment
from router_core.gateway.body_read import read_body, refusal_response
from router_core.gateway.errors import error_response, status_of
from router_core.gateway.policy_book import PolicyBook
from router_core.gateway.policy_gate import PolicyGate
from router_core.gateway.stages import admit, analyse, screen
from router_core.gateway.stages import decide as decide_stage
from router_core.resilience.affinity import AffinityBinder
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.budgets import BudgetTracker
from router_core.resilience.prefilter import Refusal
from router_core.resilience.router_modes import RouterModes
from router_core.rules.ir import RuleSet
from router_core.rules.load import compile_policy
from router_core.state.inflight import InflightCounter
from router_core.state.quality import QualityTable
from router_core.state.view import StateView
from schemas.common import OutcomeStatus
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.hashing import query_hash
from schemas.trace import Outcome

__all__ = ["DryRunParts", "decide"]


class DryRunParts(Protocol):
    """What a dry run reads: the live base router, its policy gate, state, economics and clocks."""

    config: RouteLensConfig
    wall: Callable[[], datetime]
    policy: PolicyGate
    view: StateView
    router: Router
    quality: QualityTable
    inflight: InflightCounter
    breakers: BreakerBoard
    book: PolicyBook
    router_modes: RouterModes
    budgets: BudgetTracker
    affinity: AffinityBinder | None
    experiment: Experiment | None

    @property
    def perf(self) -> Callable[[], float]:
        """The monotonic clock."""

    @property
    def hash_key(self) -> str | None:
        """The HMAC key of query hashes (None: plain SHA-256)."""


def _unwrap(payload: Any, gw: DryRunParts) -> tuple[Any, RuleSet | None]:
    """The chat body and the policy sent with it (None: the live one).

    Raises:
        InvalidRequest: The payload is neither shape, or its policy does not compile.
    """
    if not isinstance(payload, dict):
        raise InvalidRequest("the body must be a chat request or {\"request\": ..., \"policy\": ...}")
    if "messages" in payload:
        return payload, None
    if "request" not in payload:  # {} or a body with neither: say what is missing
        raise InvalidRequest("the body must be a chat request (with 'messages') or {\"request\": ..., "
                             "\"policy\": ...}", param="messages")
    body, text = payload.get("request"), payload.get("policy")
    if text is None:
        return body, None
    if not isinstance(text, str):
        raise InvalidRequest("'policy' must be the text of a policy file", param="policy")
    fmt = payload.get("policy_format", "yaml")
    if fmt not in ("yaml", "dsl"):
        raise InvalidRequest("'policy_format' must be yaml or dsl", param="policy_format")
    try:
        return body, compile_policy(text, f"<request>.{'dsl' if fmt == 'dsl' else 'yaml'}", gw.config)
    except PolicyError as exc:
        raise InvalidRequest(str(exc), param="policy", code="invalid_policy") from exc


def _screened(policy: PolicyGate, body: Any) -> Refusal | None:
    """The chat route's 400s before analysis: the prefilter, then the contract (the buckets take tokens: skipped)."""
    if not isinstance(body, dict):
        return None  # analysis refuses it with the contract's reason
    refused = None if policy.prefilter is None else policy.prefilter.check(body)
    return refused or screen.contract_refusal(body)


def _check_forced_arm(experiment: Experiment | None, request: web.Request, body: Any) -> None:
    """Chat's 400 for a forcing header that names no arm (where chat checks it: after analysis); no arm is drawn.

    Raises:
        InvalidRequest: The header names no arm of the experiment (``unknown_arm``).
    """
    if experiment is not None and request.headers.get(experiment.arms.settings.force_header):
        experiment.arms.pick("dry-run", request.headers, body)  # the check chat's lane makes; its arm is not used


async def decide(gw: DryRunParts, request: web.Request) -> web.Response:
    """Decide one request as the gateway would, and answer the decision and its trace."""
    t0 = gw.perf()

    def state() -> Mapping[str, InstanceSnapshot]:
        return gw.inflight.adjust(gw.view.snapshot())

    raw = await read_body(request, gw.config.gateway.body_timeout_s)
    if not isinstance(raw, bytes):
        return refusal_response(raw)
    try:
        body, rules = _unwrap(orjson.loads(raw), gw)
        if (refusal := _screened(gw.policy, body)) is not None:
            return error_response(refusal.status, refusal.message, param=refusal.param, code=refusal.code)
        analysis = analyse_request(body, max_chars=gw.config.router.analyse_max_chars,
                                   attachments=gw.config.routing.attachments)
        _check_forced_arm(gw.experiment, request, body)
        ts = gw.wall()
        u = await analyse.understand(gw.policy, analysis, body, request.headers, ts, gw.view.snapshot, rules=rules,
                                     explain="all")
        rec = TraceRecorder(
            request_id=f"dryrun-{uuid.uuid4().hex[:16]}", ts=ts, router_version=gw.config.router.version,
            policy_hash=gw.book.hash_of(gw.router.policy), query_hash=query_hash(analysis.query_text, gw.hash_key),
            features=analysis.features, intent=u.intent, intent_confidence=u.confidence)
        attachments = analysis.attachments
        del analysis
        rec.record_policy(u.choice, u.extra)
        bound = None if gw.affinity is None else await admit.bind(
            gw.affinity, gw.router, request, body, rec.features, u.choice, state, dry_run=True)
        ctx = admit.context(
            request_id=rec.request_id, features=rec.features, intent=rec.intent, now=ts, route=u.choice, bound=bound,
            attachments=attachments, router=gw.router, modes=gw.router_modes, budgets=gw.budgets,
            quality=gw.quality, breakers=gw.breakers, accepts=gw.config.routing.attachments, dry_run=True)
        decision = decide_stage.decide(gw.router, ctx, gw.view, gw.inflight, None).decision  # the gateway's stage
    except orjson.JSONDecodeError:
        return error_response(400, "request body is not valid JSON", code="invalid_json")
    except (InvalidRequest, UnknownModel) as exc:
        status, code = status_of(exc)
        return error_response(status, str(exc), param=exc.param, code=code)
    rec.record_decision(decision)
    trace = rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=(gw.perf() - t0) * 1e3))
    chosen = decision.selected
    out = {
        "decision": {
            "rule": decision.rule, "selected_model": chosen.model if chosen else None,
            "selected_instance": chosen.id if chosen else None, "targets": [s.id for s in decision.targets],
            "mode": decision.mode.value, "fallback_reason": decision.fallback_reason,
            "degraded": decision.degraded.name if decision.degraded else None, "levels": list(decision.levels),
            "decision_ms": decision.decision_ms, "throttle": "not applied in a dry run",
        },
        "trace": trace.model_dump(mode="json"),
    }
    return web.Response(body=orjson.dumps(out), content_type="application/json")
