"""The router: live state, the feasible set with hysteresis, scoring, picking, and replay."""

from router_core.builtin import build_router
from router_core.errors import InvalidRequest, RoutingError, UnknownModel
from router_core.policy import Policy, policy_hash
from router_core.replay import Replay, replay
from router_core.router import AUTO_MODEL, Router

__all__ = [
    "AUTO_MODEL",
    "InvalidRequest",
    "Policy",
    "Replay",
    "Router",
    "RoutingError",
    "UnknownModel",
    "build_router",
    "policy_hash",
    "replay",
]
