"""Degraded modes (seed 000, 优雅降级): what the gateway tries when a request has no feasible target.

In the configured order (``economics.degraded.steps``): ``shed_features`` drops optional,
costly parameters (``logprobs``, ``top_logprobs``, ``n > 1``, ``best_of``, beam search);
``cap_max_tokens`` lowers ``max_tokens`` as the candidates' load rises (a shorter answer fits
more context windows and frees KV cache sooner) and decides again; ``cache`` answers from the
recent-answers cache (:mod:`router_core.resilience.answer_cache`); ``responder`` asks the
configured non-LLM responder (:func:`router_core.gateway.degraded.answer_from`); ``reject`` is a
clear 503. Every step taken is a trace step, and the one that answered sets ``fallback_reason``
and ``mode`` (``cache``; ``rules`` for the responder, like a rule chain's degraded end).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aiohttp import web

from router_core.decision import Decision, Steps
from router_core.errors import NoFeasibleInstance
from router_core.framework import DecisionContext
from router_core.gateway.degraded import answer_from
from router_core.rules.ir import DegradedTarget
from schemas.common import RoutingMode, StepKind
from schemas.config.economics import DegradedSettings
from schemas.fleet import InstanceSnapshot

if TYPE_CHECKING:
    from router_core.gateway.server import Gateway
    from router_core.recorder import TraceRecorder
    from router_core.router import Router

__all__ = ["OPTIONAL_FEATURES", "cap_max_tokens", "load_of", "max_tokens_cap", "shed_features", "walk"]

OPTIONAL_FEATURES = ("logprobs", "top_logprobs", "best_of", "use_beam_search", "length_penalty", "early_stopping")


def shed_features(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``body`` without its optional features (``n`` back to 1), and the names shed."""
    shed = [k for k in OPTIONAL_FEATURES if body.get(k) not in (None, False, 0)]
    if isinstance(n := body.get("n"), int) and n > 1:
        shed.append("n")
    out = {k: v for k, v in body.items() if k not in shed}
    return out, shed


def load_of(state: Mapping[str, InstanceSnapshot], ids: list[str]) -> float:
    """The candidates' mean KV-cache usage (0 with no data): how loaded the fleet is for this request."""
    loads = [u for i in ids if (s := state.get(i)) is not None and (u := s.kv_cache_usage) is not None]
    return sum(loads) / len(loads) if loads else 0.0


def max_tokens_cap(settings: DegradedSettings, load: float) -> int:
    """From ``max_tokens_ceiling`` at no load down to ``max_tokens_floor`` at full load, linearly."""
    x = min(1.0, max(0.0, load))
    return int(settings.max_tokens_ceiling - (settings.max_tokens_ceiling - settings.max_tokens_floor) * x)


def cap_max_tokens(body: dict[str, Any], cap: int) -> tuple[dict[str, Any], bool]:
    """``body`` with ``max_tokens`` (and ``max_completion_tokens``) at most ``cap``; whether it changed."""
    keys = [k for k in ("max_tokens", "max_completion_tokens") if k in body] or ["max_tokens"]
    if all(isinstance(body.get(k), int) and body[k] <= cap for k in keys):
        return body, False
    return {**body, **{k: cap for k in keys}}, True


def _record(rec: TraceRecorder, decision: Decision, steps: Steps, reason: str,
            mode: RoutingMode | None = None) -> None:
    """Append the degraded steps (numbered after the decision's) and the reason to the trace."""
    base = len(decision.steps)
    rec.record_decision(replace(decision, steps=tuple({**s, "seq": base + s["seq"]} for s in steps),
                                fallback_reason=reason, mode=mode or decision.mode))


async def walk(gw: Gateway, request: web.Request, body: dict[str, Any], ctx: DecisionContext, rec: TraceRecorder,
               t0: float, router: Router, decision: Decision, state: Mapping[str, InstanceSnapshot],
               answer_key: str | None) -> web.StreamResponse:
    """Try each configured degraded step in order; the first that answers does.

    Raises:
        NoFeasibleInstance: Every step was tried (or ``reject`` was reached): a 503.
    """
    settings = gw.config.economics.degraded
    steps, why = Steps(), f"no feasible instance for {decision.rule} ({decision.fallback_reason})"
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
            again = router.decide(replace(ctx, features=feats), state)
            reason = f"max_tokens capped to {cap} (candidates' load {load:.0%})"
            steps.add("degrade/cap_max_tokens", StepKind.FALLBACK, value=float(cap),
                      reason=reason + ("" if again.targets else "; still no feasible instance"))
            body = capped
            if again.targets:
                _record(rec, decision, steps, f"{why}; {reason}")
                base = len(decision.steps) + len(steps)
                renumbered = replace(again, steps=tuple({**s, "seq": base + s["seq"]} for s in again.steps),
                                     fallback_reason=f"{why}; {reason}")
                return await gw._serve(request, capped, replace(ctx, features=feats), rec, t0, router,
                                       decided=renumbered)
        elif name == "cache":
            hit = gw.answers.get(answer_key) if answer_key is not None else None
            if hit is None:
                steps.add("degrade/cache", StepKind.FALLBACK,
                          reason="answer cache off" if not gw.answers.is_enabled else "no recent answer")
                continue
            steps.add("degrade/cache", StepKind.FALLBACK, reason="answered from the recent-answers cache")
            _record(rec, decision, steps, f"{why}; answered from the recent-answers cache", RoutingMode.CACHE)
            gw.finish(rec, t0, 200)
            return web.Response(status=200, body=hit[0], content_type=hit[1],
                                headers={"x-request-id": rec.request_id})
        elif name == "responder" and settings.responder is not None:
            r = settings.responder
            answer = await answer_from(DegradedTarget(r.name, r.url, r.canned), body, rec.request_id,
                                       gw.upstream_pool, timeout_s=gw.config.gateway.upstream_timeout_s,
                                       connect_timeout_s=gw.config.gateway.connect_timeout_s)
            if answer.error is not None:
                steps.add("degrade/responder", StepKind.FALLBACK, reason=f"responder {r.name} failed ({answer.error})")
                continue
            steps.add("degrade/responder", StepKind.FALLBACK, reason=f"answered by responder {r.name}")
            _record(rec, decision, steps, f"{why}; answered by responder {r.name}", RoutingMode.RULES)
            rec.degraded_used = r.name
            gw.finish(rec, t0, answer.status)
            return web.Response(status=answer.status, body=answer.payload, content_type=answer.content_type,
                                headers={"x-request-id": rec.request_id})
        elif name == "reject":
            break
    if steps:  # the default (reject alone) leaves the trace as the decision made it
        steps.add("degrade/reject", StepKind.FALLBACK, reason="every degraded step tried; 503")
        _record(rec, decision, steps, decision.fallback_reason or why)
    raise NoFeasibleInstance(why)
