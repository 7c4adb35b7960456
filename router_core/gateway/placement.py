"""Where a request may end: the instances its size and attachments are checked against, its session's binding."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from router_core.resilience.affinity import session_key
from router_core.rules.route import RouteChoice
from schemas.fleet import InstanceSpec
from schemas.trace import RequestFeatures

if TYPE_CHECKING:
    from router_core.gateway.server import Gateway

__all__ = ["bound_instance", "context_candidates"]


def context_candidates(gw: Gateway, model: str, route: RouteChoice | None) -> list[InstanceSpec]:
    """The instances a request may end on: its rule's levels, or the requested model and the fallback model."""
    policy = gw.router.policy
    if route is not None and route.rule is not None:
        levels = route.levels()
        if None in levels:
            return list(policy.fleet)
        return [s for m in levels if m is not None for s in (policy.instances_of(m) or ())]
    fallback = policy.instances_of(policy.fallback_model) if policy.fallback_model else None
    return [*gw.router.candidates_for(model), *(fallback or ())]


async def bound_instance(gw: Gateway, request: web.Request, body: Any, features: RequestFeatures,
                         route: RouteChoice | None) -> str | None:
    """The instance the request's session is bound to (placed now, bounded load, if it has none)."""
    assert gw.affinity is not None
    key = session_key(gw.affinity.settings, request.headers, body)
    if key is None:
        return None
    ids = [s.id for s in context_candidates(gw, features.requested_model, route)]
    snap = gw.inflight.adjust(gw.view.snapshot())
    loads = {i: (s.running or 0.0) + (s.queue or 0.0) for i, s in snap.items()}
    return await gw.affinity.bound(key, ids, loads)
