"""Builds a :class:`router_core.router.Router` from the configuration: the explicit plugin list."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable

from router_core.filters.context_window import ContextWindowFilter
from router_core.filters.freshness import FreshnessFilter
from router_core.filters.metric_threshold import MetricThresholdFilter
from router_core.framework import Filter, Scorer
from router_core.router import Router
from router_core.scorers.instance_score import InstanceScoreScorer
from schemas.config import RouteLensConfig

__all__ = ["build_router", "policy_hash"]


def policy_hash(config: RouteLensConfig) -> str:
    """Return a short stable hash of everything that changes decisions (fleet, constraints, scoring)."""
    policy = config.model_dump(mode="json", include={"fleet", "constraints", "scoring", "scrape"})
    blob = json.dumps(policy, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


def build_router(config: RouteLensConfig, *, perf: Callable[[], float] = time.perf_counter) -> Router:
    """Build the router the configuration describes."""
    filters: list[Filter] = [
        FreshnessFilter(config.scrape.stale_after_s),
        ContextWindowFilter(),
        *(MetricThresholdFilter(spec) for spec in config.constraints),
    ]
    scorers: list[Scorer] = [InstanceScoreScorer(config.scoring)]
    return Router(config.fleet.instances, filters, scorers, perf=perf)
