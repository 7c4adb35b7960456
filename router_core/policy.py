"""A routing policy: everything configurable that changes decisions, built once from the config."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

from router_core.filters.constraint import ConstraintFilter
from router_core.filters.context_window import ContextWindowFilter
from router_core.filters.freshness import FreshnessFilter
from router_core.filters.version import VersionFilter
from router_core.filters.zone import ZoneFilter
from router_core.framework import Filter, Scorer
from router_core.scorers.balance import BalanceScorer
from router_core.scorers.cost import CostScorer
from router_core.scorers.error_rate import ErrorRateScorer
from router_core.scorers.kv_cache import KvCacheScorer
from router_core.scorers.latency import LatencyScorer
from router_core.scorers.quality import QualityScorer
from router_core.scorers.queue_depth import QueueDepthScorer
from router_core.scorers.warmup import WarmupScorer
from schemas.config import ModelProfile, RouteLensConfig, RouterSettings, ScoringSettings, ScrapeSettings
from schemas.fleet import InstanceSpec

__all__ = ["Policy", "policy_hash"]


def policy_hash(config: RouteLensConfig) -> str:
    """Return a short stable hash of everything that changes decisions."""
    policy = config.model_dump(
        mode="json", include={"fleet", "constraints", "scoring", "scrape", "models", "router"}
    )
    policy["router"].pop("version", None)
    blob = json.dumps(policy, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


def _scorers(config: RouteLensConfig) -> dict[str, Scorer]:
    """Every score term by name (the explicit list; weights decide which ones count)."""
    plugins: list[Scorer] = [KvCacheScorer(), QueueDepthScorer(), WarmupScorer(), ErrorRateScorer(),
                             QualityScorer(), LatencyScorer(), CostScorer(), BalanceScorer()]
    return {p.name: p for p in plugins}


@dataclass(frozen=True)
class Policy:
    """Filters, scorers and weights, picker and fallback behaviour, and the hash naming them."""

    fleet: tuple[InstanceSpec, ...]
    filters: tuple[Filter, ...]
    scorers: dict[str, Scorer]
    scoring: ScoringSettings
    scrape: ScrapeSettings
    router: RouterSettings
    models: dict[str, ModelProfile]
    hash: str
    _by_model: dict[str, tuple[InstanceSpec, ...]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: RouteLensConfig) -> Policy:
        """Build the policy the configuration describes."""
        filters: list[Filter] = [FreshnessFilter(config.scrape.stale_after_s), ContextWindowFilter()]
        if config.router.zones:
            filters.append(ZoneFilter(config.router.zones))
        if config.router.min_versions:
            filters.append(VersionFilter(config.router.min_versions))
        filters += [ConstraintFilter(c) for c in config.constraints]
        by_model: dict[str, list[InstanceSpec]] = {}
        for spec in config.fleet.instances:
            by_model.setdefault(spec.model, []).append(spec)
        return cls(
            fleet=tuple(config.fleet.instances), filters=tuple(filters), scorers=_scorers(config),
            scoring=config.scoring, scrape=config.scrape, router=config.router, models=dict(config.models),
            hash=policy_hash(config),
            _by_model={m: tuple(specs) for m, specs in by_model.items()},
        )

    def instances_of(self, model: str) -> tuple[InstanceSpec, ...] | None:
        """Return the instances serving ``model`` (None when the fleet has none)."""
        return self._by_model.get(model)

    @property
    def models_served(self) -> list[str]:
        """Models in the fleet, in configuration order."""
        return list(self._by_model)

    def weights_at(self, now: datetime) -> tuple[str, dict[str, float]]:
        """Return the scoring profile in force at ``now`` (UTC hour) and its weights."""
        hour = now.hour
        for profile in self.scoring.profiles:
            start, end = profile.hours
            if (start <= hour < end) if start < end else (hour >= start or hour < end):
                weights = self.scoring.base_weights()
                weights.update(profile.weights)
                return profile.name, weights
        return self.scoring.preset, self.scoring.base_weights()
