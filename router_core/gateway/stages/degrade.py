"""The gateway's degrade stage (seed 000, 优雅降级): what it tries when a request has no feasible target.

In the configured order (``economics.degraded.steps``): ``shed_features`` drops optional, costly
parameters; ``cap_max_tokens`` lowers ``max_tokens`` as the candidates' load rises and decides
again; ``cache`` answers from the recent-answers cache (a text question only, a stream as one
chunk: see :func:`_not_keyed_by_query`); ``responder`` asks the configured non-LLM
responder; ``reject`` is a clear 503. The body transformations are
:mod:`router_core.resilience.degrade`'s; this stage orders them and returns what they came to,
as a value: the gateway's runner records it in the trace and answers (the stage writes nothing).
Every step taken is a trace step, and the one that answered sets ``fallback_reason`` and
``mode`` (``cache``; ``rules`` for the responder, like a rule chain's degraded end).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from router_core.decide.decision import Decision, DecisionContext, Steps
from router_core.gateway.degraded import DegradedAnswer, answer_from, cached_answer
from router_core.gateway.http1 import Http1Pool
from router_core.gateway.trace_context import TraceContext
from router_core.resilience.answer_cache import AnswerCache
from router_core.resilience.degrade import cap_max_tokens, load_of, max_tokens_cap, shed_features
from router_core.rules.ir import DegradedTarget
from schemas.common import RoutingMode, StepKind
from schemas.config import GatewaySettings
from schemas.config.economics import DegradedSettings
from schemas.fleet import InstanceSnapshot

__all__ = ["Degraded", "degrade"]

Decide = Callable[[DecisionContext, Mapping[str, InstanceSnapshot]], Decision]


@dataclass(frozen=True, slots=True)
class Degraded:
    """What the degraded steps came to.

    Attributes:
        reason: Why the request is degraded (the 503's message when nothing answered).
        recorded: The decision with the degraded steps appended (numbered after its own) and the
            reason, for the trace; None when no step was taken (``reject`` alone).
        answer: The answer from the cache or the responder (None: neither answered).
        responder: The responder that answered, by name (None: none did).
        redecided: A new decision with targets after ``max_tokens`` was capped, its steps numbered
            after the degraded ones: serve the request with it (and ``body``, ``ctx``).
        body: The request body as the steps left it (optional features shed, ``max_tokens`` capped).
        ctx: The decision context, with the capped ``max_tokens`` when it was capped.
    """

    reason: str
    recorded: Decision | None
    answer: DegradedAnswer | None
    responder: str | None
    redecided: Decision | None
    body: dict[str, Any]
    ctx: DecisionContext


def _not_keyed_by_query(body: dict[str, Any], ctx: DecisionContext) -> str | None:
    """Why the cache's key (the model and the last user message's text) cannot stand for this request's answer.

    Its attachments, its tools or the tool results it ends with decide the answer, and the key
    holds none of them: another image under the same words would get this one's answer. None: a
    text question, which the cache may answer.
    """
    if ctx.features.has_attachments:
        return "not from the cache: the request has attachments"
    if body.get("tools") or body.get("functions"):
        return "not from the cache: the request offers tools"
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not isinstance(last, dict) or last.get("role") != "user":
        return "not from the cache: the conversation does not end with the user's message"
    return None


def _with_steps(decision: Decision, steps: Steps, reason: str, mode: RoutingMode | None = None) -> Decision:
    """``decision`` carrying the degraded ``steps`` (numbered after its own) and ``reason``."""
    base = len(decision.steps)
    return replace(decision, steps=tuple({**s, "seq": base + s["seq"]} for s in steps), fallback_reason=reason,
                   mode=mode or decision.mode)


async def degrade(settings: DegradedSettings, decision: Decision, body: dict[str, Any], ctx: DecisionContext,
                  state: Mapping[str, InstanceSnapshot], decide: Decide, *, answers: AnswerCache,
                  answer_key: str | None, request_id: str, pool: Callable[[], Http1Pool],
                  gateway: GatewaySettings, trace: TraceContext | None = None) -> Degraded:
    """Try each configured degraded step in order; the first that answers (or finds a target) ends the walk.

    Args:
        settings: ``economics.degraded``.
        decision: The decision that found no feasible target.
        body: The chat request.
        ctx: Its decision context.
        state: The state it was decided on (capping decides again on the same).
        decide: The router's ``decide``.
        answers: The recent-answers cache.
        answer_key: The request's key in it (None: not cached).
        request_id: The request's id (sent to the responder).
        pool: The upstream connection pool (asked for only when a responder is called).
        gateway: The gateway's timeouts, for the responder.
        trace: The request's trace context, sent on to the responder (``traceparent``).
    """
    steps, why = Steps(), f"no feasible instance for {decision.rule} ({decision.fallback_reason})"

    def ended(reason: str, *, answer: DegradedAnswer | None = None, responder: str | None = None,
              mode: RoutingMode | None = None, redecided: Decision | None = None) -> Degraded:
        return Degraded(reason, _with_steps(decision, steps, reason, mode), answer, responder, redecided, body, ctx)

    for name in settings.steps:
        if name == "shed_features":
            body, shed = shed_features(body)
            steps.add("degrade/shed_features", StepKind.FALLBACK,
                      reason=f"shed {', '.join(shed)}" if shed else "no optional feature to shed")
        elif name == "cap_max_tokens":
            load = load_of(state, [str(c["instance"]) for c in decision.candidates])
            cap = max_tokens_cap(settings, load)
            capped, changed = cap_max_tokens(body, cap)
            if not changed:
                steps.add("degrade/cap_max_tokens", StepKind.FALLBACK, reason=f"max_tokens already within {cap}")
                continue
            feats = ctx.features.model_copy(update={"max_tokens": cap})
            again = decide(replace(ctx, features=feats), state)
            reason = f"max_tokens capped to {cap} (candidates' load {load:.0%})"
            steps.add("degrade/cap_max_tokens", StepKind.FALLBACK, value=float(cap),
                      reason=reason + ("" if again.targets else "; still no feasible instance"))
            body = capped
            if again.targets:
                base = len(decision.steps) + len(steps)
                renumbered = replace(again, steps=tuple({**s, "seq": base + s["seq"]} for s in again.steps),
                                     fallback_reason=f"{why}; {reason}")
                ctx = replace(ctx, features=feats)
                return ended(f"{why}; {reason}", redecided=renumbered)
        elif name == "cache":
            unkeyed = None if answer_key is None else _not_keyed_by_query(body, ctx)
            hit = answers.get(answer_key) if answer_key is not None and unkeyed is None else None
            answer = None if hit is None else cached_answer(*hit, stream=body.get("stream") is True)
            if answer is None:
                reason = "answer cache off" if not answers.is_enabled else unkeyed or (
                    "no recent answer" if hit is None else "the recent answer cannot be sent as a stream")
                steps.add("degrade/cache", StepKind.FALLBACK, reason=reason)
                continue
            steps.add("degrade/cache", StepKind.FALLBACK, reason="answered from the recent-answers cache")
            return ended(f"{why}; answered from the recent-answers cache", answer=answer, mode=RoutingMode.CACHE)
        elif name == "responder" and settings.responder is not None:
            r = settings.responder
            answer = await answer_from(DegradedTarget(r.name, r.url, r.canned), body, request_id, pool(),
                                       timeout_s=gateway.upstream_timeout_s,
                                       connect_timeout_s=gateway.connect_timeout_s, trace=trace)
            if answer.error is not None:
                steps.add("degrade/responder", StepKind.FALLBACK, reason=f"responder {r.name} failed ({answer.error})")
                continue
            steps.add("degrade/responder", StepKind.FALLBACK, reason=f"answered by responder {r.name}")
            return ended(f"{why}; answered by responder {r.name}", answer=answer, responder=r.name,
                         mode=RoutingMode.RULES)
        elif name == "reject":
            break
    if not steps:  # the default (reject alone) leaves the trace as the decision made it
        return Degraded(why, None, None, None, None, body, ctx)
    steps.add("degrade/reject", StepKind.FALLBACK, reason="every degraded step tried; 503")
    return Degraded(why, _with_steps(decision, steps, decision.fallback_reason or why), None, None, None, body, ctx)
