"""The decision sections of ``routelens.yaml``: ``router``, ``constraints``, ``scoring`` and ``models``.

They say how a request is decided. An A/B arm's or a shadow's policy replaces them section by
section (``experiments:``); the other sections (fleet, gateway, storage...) are the serving
config's and are shared by every arm.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from schemas.common import ContractModel
from schemas.config.routing import HourRange
from schemas.units import ZoneName

__all__ = [
    "PLUGIN_NAME_PATTERN",
    "SCORING_PRESETS",
    "TERM_NAMES",
    "ConstraintRule",
    "ConstraintSpec",
    "Metric",
    "ModelProfile",
    "Op",
    "PluginSpec",
    "RouterSettings",
    "ScoringProfile",
    "ScoringSettings",
]

Metric = Literal[
    "kv_cache_usage",
    "queue",
    "running",
    "error_rate",
    "warmup_progress",
    "p50_latency_ms",
    "p95_latency_ms",
    "ttft_p95_ms",
    "e2e_p95_ms",
]
Op = Literal["<=", "<", ">=", ">"]
PLUGIN_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"
TERM_NAMES = ("mem", "queue", "warmup", "error", "quality", "latency", "cost", "balance")

# The seed's instance score: 0.4*(1-mem) + 0.3*(1-queue/10) + 0.2*warmup + 0.1*(1-error_rate).
SCORING_PRESETS: dict[str, dict[str, float]] = {
    "seed-instance-score": {"mem": 0.4, "queue": 0.3, "warmup": 0.2, "error": 0.1},
    "balanced": {"quality": 0.4, "latency": 0.3, "cost": 0.2, "balance": 0.1},
}


class ConstraintRule(ContractModel):
    """A hard constraint with hysteresis: ``metric op threshold`` must hold for an instance to stay.

    The instance leaves the feasible set once the constraint has been broken for ``exit_for``
    seconds and comes back only after the metric has stayed on the good side of ``enter_below``
    (for ``>=``/``>`` constraints: above it) for ``enter_for`` seconds: the seed's 85% / 80%.
    Between ``soft_threshold`` and ``threshold`` the instance's score ramps down linearly.
    These are also the parameters of a ``constraint-filter`` plugin (its name names the constraint).
    """

    metric: Metric
    op: Op = "<="
    threshold: float
    enter_below: float | None = Field(None, description="Re-entry bound; default: the threshold.")
    exit_for: float = Field(2.0, ge=0, description="Seconds broken before the instance leaves.")
    enter_for: float = Field(5.0, ge=0, description="Seconds good before it comes back.")
    soft_threshold: float | None = Field(None, description="Where the score ramp starts.")
    models: list[str] = Field(default=[], description="Only for these models (empty: all).")
    instances: list[str] = Field(default=[], description="Only for these instances (empty: all).")

    @property
    def upper_bound(self) -> bool:
        """True for ``<=``/``<`` constraints (the metric must stay low)."""
        return self.op in ("<=", "<")

    @property
    def enter_bound(self) -> float:
        """The bound a latched-out instance must satisfy to come back."""
        return self.threshold if self.enter_below is None else self.enter_below

    @model_validator(mode="after")
    def _bounds_in_order(self) -> Self:
        low_is_good = self.upper_bound
        for name, bound in (("enter_below", self.enter_below), ("soft_threshold", self.soft_threshold)):
            if bound is not None and (bound > self.threshold if low_is_good else bound < self.threshold):
                side = "at most" if low_is_good else "at least"
                raise ValueError(f"{name} must be {side} the threshold {self.threshold:g} for op {self.op!r}")
        return self


class ConstraintSpec(ConstraintRule):
    """A named :class:`ConstraintRule`: an entry of ``constraints:``."""

    name: str = Field(pattern=PLUGIN_NAME_PATTERN)


class PluginSpec(ContractModel):
    """One plugin of ``router.plugins``: its registered type, instance name, weight and parameters.

    The name defaults to the plugin type's own default (scorers: their score term, such as ``mem``).
    Scorers need a ``weight``; filters and pickers must not have one. ``parameters`` is validated by
    the plugin's own ``Params`` model when the router is built.
    """

    type: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str | None = Field(None, pattern=PLUGIN_NAME_PATTERN)
    weight: float | None = Field(None, ge=0, description="A scorer's weight in the total score.")
    parameters: dict[str, Any] = Field(default={}, description="The plugin type's own parameters.")


class RouterSettings(ContractModel):
    """Identity of the router build, privacy settings, picking and the empty-feasible-set behaviour."""

    version: str = "routelens-0.1.0"
    hash_key_env: str | None = Field(
        None, description="Environment variable holding the HMAC key for query hashes (and the fingerprints of "
        "header and metadata values a rule's explanation withholds)."
    )
    analyse_max_chars: int = Field(20_000, gt=0, description="Longer input is cut for analysis.")
    picker: Literal["max", "p2c", "softmax"] = Field(
        "max", description="max: best score; p2c/softmax sample so that gateways do not herd."
    )
    softmax_temperature: float = Field(0.05, gt=0)
    on_empty: Literal["fail_open", "reject"] = Field(
        "fail_open", description="When nothing is feasible: rank every candidate whose context window holds the "
                                 "request anyway, or answer 503."
    )
    fallback_model: str | None = Field(
        None, description="Try this model's instances first when the requested ones are all infeasible."
    )
    zones: list[str] = Field(default=[], description="Zones the router may use (empty: all).")
    min_versions: dict[str, Annotated[str, Field(pattern=r"^\d+(\.\d+)*$")]] = Field(
        default={}, description="Per model, the lowest instance version allowed (e.g. a compliance rule)."
    )
    plugins: list[PluginSpec] | None = Field(
        None,
        description="The whole plugin pipeline, named explicitly (filters in order, weighted scorers, at most one "
        "picker). When absent, the sections (constraints, scoring, picker, zones, min_versions) derive it.",
    )



def _check_weights(value: dict[str, float]) -> dict[str, float]:
    unknown = sorted(set(value) - set(TERM_NAMES))
    if unknown:
        raise ValueError(f"unknown score terms {unknown}; known: {', '.join(TERM_NAMES)}")
    negative = sorted(k for k, w in value.items() if w < 0)
    if negative:
        raise ValueError(f"weights must be >= 0 (got {negative})")
    return value


class ScoringProfile(ContractModel):
    """Weights for part of the day, e.g. quality at night and latency at peak (hours in `scoring.timezone`)."""

    name: str
    hours: HourRange = Field(
        description="[start, end) in local hours of scoring.timezone: start 0-23, end 0-24 (24: midnight); start > "
        "end wraps midnight.")
    weights: dict[str, float]

    @field_validator("weights")
    @classmethod
    def _known_terms(cls, value: dict[str, float]) -> dict[str, float]:
        return _check_weights(value)


class ScoringSettings(ContractModel):
    """Which score terms count and how much: a named preset, optionally overridden."""

    preset: Literal["seed-instance-score", "balanced"] = "seed-instance-score"
    weights: dict[str, float] = Field(default={}, description="Overrides the preset's weights.")
    queue_norm: float = Field(10.0, gt=0, description="Queue length that scores zero.")
    latency_slo_ms: float = Field(3000.0, gt=0, description="Predicted latency that scores zero.")
    profiles: list[ScoringProfile] = Field(
        default=[], description="Weights for parts of the day; the first whose hours hold the request's time wins.")
    timezone: ZoneName = Field(
        "UTC", description="IANA zone the profiles' hours are read in, at the request's own time (a trace's ts in "
        "a replay). Default UTC, as profiles were read before this field existed; routing.timezone is the rules'.")

    @field_validator("weights")
    @classmethod
    def _known_terms(cls, value: dict[str, float]) -> dict[str, float]:
        return _check_weights(value)

    def base_weights(self) -> dict[str, float]:
        """Return the preset's weights with the overrides applied."""
        weights = dict(SCORING_PRESETS[self.preset])
        weights.update(self.weights)
        return weights


class ModelProfile(ContractModel):
    """What the router believes about a model before feedback refines it."""

    quality: dict[str, float] = Field(default={}, description="Prior probability of a good answer, per class.")
    latency_ms: float = Field(500.0, gt=0, description="Typical unloaded end-to-end latency.")
    max_concurrency: int = Field(16, ge=1, description="Sequences per instance before requests queue.")

