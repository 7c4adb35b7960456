"""The router: live state, plugins (filters, scorers, pickers), the decision, and replay."""

from router_core.builtin import build_router, builtin_registry, register_builtin
from router_core.decision import Decision
from router_core.errors import (
    AttemptsExhausted,
    InvalidRequest,
    NoFeasibleInstance,
    PluginConfigError,
    PluginError,
    ProfileError,
    RoutingError,
    UnknownModel,
    UnknownPluginType,
)
from router_core.framework import PluginRegistry
from router_core.policy import Policy, build_policy, policy_hash
from router_core.replay import Replay, replay
from router_core.router import AUTO_MODEL, Router

__all__ = [
    "AUTO_MODEL",
    "AttemptsExhausted",
    "Decision",
    "InvalidRequest",
    "NoFeasibleInstance",
    "PluginConfigError",
    "PluginError",
    "PluginRegistry",
    "Policy",
    "ProfileError",
    "Replay",
    "Router",
    "RoutingError",
    "UnknownModel",
    "UnknownPluginType",
    "build_policy",
    "build_router",
    "builtin_registry",
    "policy_hash",
    "register_builtin",
    "replay",
]
