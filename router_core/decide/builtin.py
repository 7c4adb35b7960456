"""Every in-tree plugin, listed explicitly (one line each), and :func:`build_router`.

Adding a plugin is a new file in ``filters/``, ``scorers/`` or ``pickers/`` and one line here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from router_core.decide.policy import build_policy, policy_hash
from router_core.decide.router import Router
from router_core.filters.attachment import AttachmentFilter
from router_core.filters.breaker import BreakerFilter
from router_core.filters.constraint import ConstraintFilter
from router_core.filters.context_window import ContextWindowFilter
from router_core.filters.freshness import FreshnessFilter
from router_core.filters.probe import ProbeFilter
from router_core.filters.version import VersionFilter
from router_core.filters.zone import ZoneFilter
from router_core.framework import PluginRegistry
from router_core.metrics import PluginMetrics
from router_core.pickers.max_score import MaxScorePicker
from router_core.pickers.power_of_two import PowerOfTwoPicker
from router_core.pickers.softmax import SoftmaxPicker
from router_core.scorers.balance import BalanceScorer
from router_core.scorers.cost import CostScorer
from router_core.scorers.error_rate import ErrorRateScorer
from router_core.scorers.kv_cache import KvCacheScorer
from router_core.scorers.latency import LatencyScorer
from router_core.scorers.quality import QualityScorer
from router_core.scorers.queue_depth import QueueDepthScorer
from router_core.scorers.warmup import WarmupScorer
from schemas.config import RouteLensConfig

__all__ = ["build_router", "builtin_registry", "policy_hash", "register_builtin"]


def register_builtin(registry: PluginRegistry) -> PluginRegistry:
    """Register every in-tree plugin type in ``registry`` and return it."""
    registry.register(FreshnessFilter.TYPE, FreshnessFilter)
    registry.register(ContextWindowFilter.TYPE, ContextWindowFilter)
    registry.register(AttachmentFilter.TYPE, AttachmentFilter)
    registry.register(ZoneFilter.TYPE, ZoneFilter)
    registry.register(VersionFilter.TYPE, VersionFilter)
    registry.register(ConstraintFilter.TYPE, ConstraintFilter)
    registry.register(ProbeFilter.TYPE, ProbeFilter)
    registry.register(BreakerFilter.TYPE, BreakerFilter)
    registry.register(KvCacheScorer.TYPE, KvCacheScorer)
    registry.register(QueueDepthScorer.TYPE, QueueDepthScorer)
    registry.register(WarmupScorer.TYPE, WarmupScorer)
    registry.register(ErrorRateScorer.TYPE, ErrorRateScorer)
    registry.register(QualityScorer.TYPE, QualityScorer)
    registry.register(LatencyScorer.TYPE, LatencyScorer)
    registry.register(CostScorer.TYPE, CostScorer)
    registry.register(BalanceScorer.TYPE, BalanceScorer)
    registry.register(MaxScorePicker.TYPE, MaxScorePicker)
    registry.register(PowerOfTwoPicker.TYPE, PowerOfTwoPicker)
    registry.register(SoftmaxPicker.TYPE, SoftmaxPicker)
    return registry


def builtin_registry() -> PluginRegistry:
    """A fresh registry holding the in-tree plugins."""
    return register_builtin(PluginRegistry())


def build_router(config: RouteLensConfig, *, registry: PluginRegistry | None = None,
                 metrics: CollectorRegistry | None = None,
                 perf: Callable[[], float] = time.perf_counter) -> Router:
    """Build the router the configuration describes.

    Args:
        config: The validated configuration.
        registry: Plugin types to build from (None: a fresh :func:`builtin_registry`).
        metrics: Where ``routelens_router_plugin_duration_seconds`` is registered (None: not recorded).
        perf: Monotonic clock for step durations.

    Raises:
        PluginError: A plugin spec that cannot be built (see :mod:`router_core.errors`).
    """
    policy = build_policy(config, registry or builtin_registry())
    return Router(policy, perf=perf, metrics=None if metrics is None else PluginMetrics(metrics))
