"""Where a request may end: the instances its size and attachments are checked against, its session's binding."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from router_core.decide.router import Router
from router_core.resilience.affinity import AffinityBinder, session_key
from router_core.rules.route import RouteChoice
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import RequestFeatures

__all__ = ["bound_instance", "context_candidates"]


def context_candidates(router: Router, model: str, route: RouteChoice | None) -> list[InstanceSpec]:
    """The instances a request may end on: its rule's levels, or the requested model and the fallback model."""
    policy = router.policy
    if route is not None and route.rule is not None:
        levels = route.levels()
        if None in levels:
            return list(policy.fleet)
        return [s for m in levels if m is not None for s in (policy.instances_of(m) or ())]
    fallback = policy.instances_of(policy.fallback_model) if policy.fallback_model else None
    return [*router.candidates_for(model), *(fallback or ())]


async def bound_instance(affinity: AffinityBinder, router: Router, request: web.Request, body: Any,
                         features: RequestFeatures, route: RouteChoice | None,
                         state: Callable[[], Mapping[str, InstanceSnapshot]], *, dry_run: bool = False) -> str | None:
    """The instance the request's session is bound to (placed now, bounded load, if it has none).

    ``state`` gives the in-flight-adjusted state the load bound reads (asked only for a session key).
    ``dry_run``: the binding is read, never made (a session without one gets the instance it would be placed on).
    """
    key = session_key(affinity.settings, request.headers, body)
    if key is None:
        return None
    ids = [s.id for s in context_candidates(router, features.requested_model, route)]
    loads = {i: (s.running or 0.0) + (s.queue or 0.0) for i, s in state().items()}
    return affinity.peek(key, ids, loads) if dry_run else await affinity.bound(key, ids, loads)
