"""Builds a :class:`router_core.router.Router` from the configuration."""

from __future__ import annotations

import time
from collections.abc import Callable

from router_core.policy import Policy, policy_hash
from router_core.router import Router
from schemas.config import RouteLensConfig

__all__ = ["build_router", "policy_hash"]


def build_router(config: RouteLensConfig, *, perf: Callable[[], float] = time.perf_counter) -> Router:
    """Build the router the configuration describes."""
    return Router(Policy.from_config(config), perf=perf)
