"""A routing policy: the plugins, weights and fallback behaviour that decide, built once from the config."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from router_core.decide.plugin_specs import PICKER_TYPES, specs_from_sections
from router_core.errors import ProfileError
from router_core.filters.constraint import ConstraintFilter
from router_core.framework import Filter, Handle, Picker, PluginRegistry, Scorer
from router_core.rules.route import PeakHours
from router_core.scorers.cost import CostScorer
from schemas.config import (
    ConstraintSpec,
    ModelProfile,
    PluginSpec,
    RouteLensConfig,
    ScoringProfile,
    ScrapeSettings,
)
from schemas.config.routing import RoutingSettings, in_hours
from schemas.fleet import CostSpec, InstanceSpec

__all__ = ["Policy", "build_policy", "policy_hash"]

_DEFAULT_ROUTING = RoutingSettings().model_dump(mode="json")
_COST_DEFAULTS = {k: v for k, v in CostSpec().model_dump(mode="json").items()
                  if k in ("input_per_1m", "output_per_1m", "expected_output_tokens")}
_NO_OFFSET = timedelta(0)  # a fixed zone's ``utcoffset(None)`` (UTC's); a zone with DST gives None


def policy_hash(config: RouteLensConfig) -> str:
    """Return a short stable hash of everything that changes decisions."""
    policy = config.model_dump(
        mode="json", include={"fleet", "constraints", "scoring", "scrape", "models", "router"}
    )
    policy["router"].pop("version", None)
    if policy["scrape"].get("warmup_s") == 90.0:
        policy["scrape"].pop("warmup_s")  # the default leaves the hash as it was before the setting existed
    if policy["scoring"].get("timezone") == "UTC":
        policy["scoring"].pop("timezone")  # the default reads profiles as before it existed: the hash stays too
    for instance in policy["fleet"]["instances"]:
        instance.pop("api_key_env", None)  # credentials never change a decision (and came after the hash)
        for key in ("upstream_model", "probes"):  # the name sent upstream, what probes it: not what decides
            instance.pop(key, None)
        for key in ("features", "kv_cache_bytes"):  # unset, they leave the hash as it was before they existed
            if not instance.get(key):
                instance.pop(key, None)
        cost = instance.get("cost") or {}
        for key, default in _COST_DEFAULTS.items():  # per-request pricing alone: the hash it had before token prices
            if cost.get(key) == default:
                cost.pop(key)
    if policy["router"].get("plugins") is None:
        policy["router"].pop("plugins", None)  # configs without it keep the hash they had before it existed
    routing = config.routing.model_dump(mode="json")
    if routing != _DEFAULT_ROUTING:  # the policy file's name, term lists, accept map...; its text: trace.policy
        policy["routing"] = routing
    blob = json.dumps(policy, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True)
class Policy:
    """Filters in order, scorers by name with their base weights, one picker, fallback behaviour, the hash.

    ``scoring_zone``: where the profiles' hours are read (``scoring.timezone``; None: UTC, the hour of
    ``now`` as given). ``peak_hours``: ``routing.peak_hours`` in ``routing.timezone``, which prices an
    instance's request (:meth:`price`); the cost scorer reads the same object.
    """

    fleet: tuple[InstanceSpec, ...]
    filters: tuple[Filter, ...]
    scorers: dict[str, Scorer]
    base_weights: dict[str, float]
    profiles: tuple[ScoringProfile, ...]
    weights_name: str
    picker: Picker
    on_empty: str
    fallback_model: str | None
    scrape: ScrapeSettings
    queue_norm: float
    models: dict[str, ModelProfile]
    hash: str
    scoring_zone: ZoneInfo | None = None
    peak_hours: PeakHours = field(default_factory=PeakHours, repr=False, compare=False)
    _by_model: dict[str, tuple[InstanceSpec, ...]] = field(default_factory=dict)
    config: RouteLensConfig | None = field(default=None, repr=False, compare=False)  # what it was built from

    @property
    def constraints(self) -> list[ConstraintSpec]:
        """The constraint filters' specs: what the state view latches with hysteresis."""
        return [f.spec for f in self.filters if isinstance(f, ConstraintFilter)]

    def instances_of(self, model: str) -> tuple[InstanceSpec, ...] | None:
        """Return the instances serving ``model`` (None when the fleet has none)."""
        return self._by_model.get(model)

    @property
    def models_served(self) -> list[str]:
        """Models in the fleet, in configuration order."""
        return list(self._by_model)

    def scoring_hour(self, now: datetime) -> int:
        """The hour the profiles read: the instant ``now`` (naive is taken as UTC) in ``scoring.timezone``.

        ``now`` may come in any zone (a trace's ``ts`` as a reader or a JSON parser gave it): the
        hour is that of the instant, not of ``now``'s own wall clock.
        """
        zone = self.scoring_zone
        tz = now.tzinfo
        if zone is None:  # UTC: ``now.hour`` unless ``now`` is in a zone other than UTC (cheap checks first)
            return now.hour if tz is None or tz is UTC or tz.utcoffset(None) == _NO_OFFSET else now.astimezone(UTC).hour
        return (now if tz is not None else now.replace(tzinfo=UTC)).astimezone(zone).hour

    def weights_at(self, now: datetime) -> tuple[str, dict[str, float]]:
        """Return the name of the weights in force at ``now`` and them.

        The first profile whose hours hold ``now``'s hour in ``scoring.timezone``, else the base
        weights. ``now`` is the request's own time (a trace's ``ts`` in a replay); the name is what
        the trace's score steps record.
        """
        hour = self.scoring_hour(now)
        for profile in self.profiles:
            if in_hours(hour, *profile.hours):
                weights = dict(self.base_weights)
                weights.update(profile.weights)
                return profile.name, weights
        return self.weights_name, dict(self.base_weights)

    def price(self, cost: CostSpec, now: datetime, prompt_tokens: int = 0, completion_tokens: int = 0) -> float:
        """An instance's price of a request at ``now`` of these tokens (see :class:`schemas.fleet.CostSpec`).

        ``cost.base`` plus the tokens at their prices, times its surge in peak hours.
        """
        return self.peak_hours.price(cost, now, prompt_tokens, completion_tokens)


def build_policy(config: RouteLensConfig, registry: PluginRegistry) -> Policy:
    """Build the policy ``config`` describes: ``router.plugins`` if given, else the sections' plugins.

    Raises:
        UnknownPluginType, PluginConfigError: A spec ``registry`` cannot build.
        ProfileError: A weightless scorer, a weight on a filter or picker, a second picker, a name
            used twice at one extension point.
    """
    explicit = config.router.plugins is not None
    specs = config.router.plugins if config.router.plugins is not None else specs_from_sections(config)
    handle = Handle(models=dict(config.models), scrape=config.scrape)
    peak = PeakHours.of(config.routing)
    filters: list[Filter] = []
    scorers: dict[str, Scorer] = {}
    weights: dict[str, float] = {}
    pickers: list[Picker] = []
    for i, spec in enumerate(specs):
        loc: tuple[int | str, ...] = ("router", "plugins", i) if explicit else ("router",)
        plugin: Any = registry.create(spec, handle, loc=loc)
        if isinstance(plugin, CostScorer):
            plugin.peak_hours = peak  # prices at the request's time, as the trace's cost and the budgets do
        point, label = registry.extension_point(spec.type), f"{plugin.name}/{spec.type}"
        if point == "scorer" and spec.weight is None and explicit:
            raise ProfileError(label, [(loc + ("weight",), f"the scorer {label} needs a weight")])
        if point != "scorer" and spec.weight is not None:
            raise ProfileError(label, [(loc + ("weight",), f"{label} is a {point}: only scorers take a weight")])
        if plugin.name in ([f.name for f in filters] if point == "filter" else scorers if point == "scorer" else ()):
            raise ProfileError(label, [(loc + ("name",), f"a second {point} named {plugin.name!r}")])
        if point == "filter":
            filters.append(plugin)
        elif point == "scorer":
            scorers[plugin.name] = plugin
            if spec.weight is not None:
                weights[plugin.name] = spec.weight
        else:
            pickers.append(plugin)
            if len(pickers) > 1:
                raise ProfileError(label, [(loc, f"a second picker ({label}); a profile has exactly one")])
    if not pickers:
        pickers.append(registry.create(PluginSpec(type=PICKER_TYPES["max"]), handle))
    by_model: dict[str, list[InstanceSpec]] = {}
    for inst in config.fleet.instances:
        by_model.setdefault(inst.model, []).append(inst)
    return Policy(
        fleet=tuple(config.fleet.instances), filters=tuple(filters), scorers=scorers, base_weights=weights,
        profiles=tuple(config.scoring.profiles), weights_name="plugins" if explicit else config.scoring.preset,
        picker=pickers[0], on_empty=config.router.on_empty, fallback_model=config.router.fallback_model,
        scrape=config.scrape, queue_norm=config.scoring.queue_norm, models=dict(config.models),
        hash=policy_hash(config),
        scoring_zone=None if config.scoring.timezone == "UTC" else ZoneInfo(config.scoring.timezone),
        peak_hours=peak, _by_model={m: tuple(s) for m, s in by_model.items()}, config=config,
    )
