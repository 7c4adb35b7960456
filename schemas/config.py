"""The ``routelens.yaml`` configuration, validated at load time.

Raw dicts exist only at the YAML boundary; :func:`schemas.yamlconf.parse_yaml_model` turns text
into these models and names file, line and field for every problem.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from schemas.common import ContractModel
from schemas.fleet import InstanceSpec
from schemas.probes_config import ProbeSettings
from schemas.sim_config import SimModelProfile, SimSettings
from schemas.storage_config import StorageSettings

__all__ = [
    "AppSettings",
    "SCORING_PRESETS",
    "TERM_NAMES",
    "ConstraintRule",
    "ConstraintSpec",
    "PluginSpec",
    "ModelProfile",
    "ScoringProfile",
    "FleetSettings",
    "GatewaySettings",
    "HealthBand",
    "HealthThresholds",
    "RouteLensConfig",
    "RouterSettings",
    "ScoringSettings",
    "ScrapeSettings",
    "SimModelProfile",
    "SimSettings",
    "StorageSettings",
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
        None, description="Environment variable holding the HMAC key for query hashes."
    )
    analyse_max_chars: int = Field(20_000, gt=0, description="Longer input is cut for analysis.")
    picker: Literal["max", "p2c", "softmax"] = Field(
        "max", description="max: best score; p2c/softmax sample so that gateways do not herd."
    )
    softmax_temperature: float = Field(0.05, gt=0)
    on_empty: Literal["fail_open", "reject"] = Field(
        "fail_open", description="When nothing is feasible: rank every candidate anyway, or answer 503."
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


class GatewaySettings(ContractModel):
    """The OpenAI-compatible HTTP gateway."""

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    connect_timeout_s: float = Field(1.0, gt=0, description="TCP connect to an instance, per attempt.")
    upstream_timeout_s: float = Field(
        60.0, gt=0, description="Total time of one non-stream attempt (streams use the three timeouts below)."
    )
    first_byte_timeout_s: float = Field(
        60.0, gt=0,
        description="Stream: from sending the request to the first body byte; past it the next instance is tried.",
    )
    idle_timeout_s: float = Field(
        30.0, gt=0, description="Stream: longest pause between two chunks; past it the stream ends in an error event.",
    )
    api_keys_env: str | None = Field(
        None,
        description="Environment variable with the comma-separated keys clients must send as 'Authorization: Bearer'; "
        "unset: open, allowed only when the gateway binds a loopback address.",
    )
    forward_authorization: bool = Field(
        False,
        description="Send the client's Authorization header upstream instead of the instance's api_key_env key "
        "(the gateway's own key check still applies when api_keys_env is set).",
    )
    max_attempts: int = Field(2, ge=1, le=10, description="Instances tried before giving up.")
    max_connections: int = Field(512, ge=1)
    workers: Literal["auto"] | int = Field(
        "auto",
        description="Gateway processes sharing the port ('routelens serve'); 'auto' is one per core, at most 8. "
        "More than one runs the trace store in a process of its own. --workers overrides it.",
    )

    @field_validator("workers")
    @classmethod
    def _workers_range(cls, value: str | int) -> str | int:
        if isinstance(value, int) and not 1 <= value <= 64:
            raise ValueError("workers must be 'auto' or 1..64")
        return value

    def worker_count(self, cores: int | None) -> int:
        """The number of gateway processes: ``workers``, or one per core (at most 8) for 'auto'."""
        return min(max(cores or 1, 1), 8) if self.workers == "auto" else int(self.workers)


def _check_weights(value: dict[str, float]) -> dict[str, float]:
    unknown = sorted(set(value) - set(TERM_NAMES))
    if unknown:
        raise ValueError(f"unknown score terms {unknown}; known: {', '.join(TERM_NAMES)}")
    negative = sorted(k for k, w in value.items() if w < 0)
    if negative:
        raise ValueError(f"weights must be >= 0 (got {negative})")
    return value


class ScoringProfile(ContractModel):
    """Weights for part of the day, e.g. quality at night and latency at peak (UTC hours)."""

    name: str
    hours: tuple[int, int] = Field(description="[start, end) in hours 0-24; start > end wraps midnight.")
    weights: dict[str, float]

    @field_validator("weights")
    @classmethod
    def _known_terms(cls, value: dict[str, float]) -> dict[str, float]:
        return _check_weights(value)

    @field_validator("hours")
    @classmethod
    def _hours(cls, value: tuple[int, int]) -> tuple[int, int]:
        if not all(0 <= h <= 24 for h in value) or value[0] == value[1]:
            raise ValueError("hours must be two different values in 0..24")
        return value


class ScoringSettings(ContractModel):
    """Which score terms count and how much: a named preset, optionally overridden."""

    preset: Literal["seed-instance-score", "balanced"] = "seed-instance-score"
    weights: dict[str, float] = Field(default={}, description="Overrides the preset's weights.")
    queue_norm: float = Field(10.0, gt=0, description="Queue length that scores zero.")
    latency_slo_ms: float = Field(3000.0, gt=0, description="Predicted latency that scores zero.")
    profiles: list[ScoringProfile] = []

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


class ScrapeSettings(ContractModel):
    """How live state is collected from instances' ``/metrics``."""

    interval_s: float = Field(1.0, gt=0)
    timeout_s: float = Field(0.5, gt=0)
    suspect_after_s: float = Field(3.0, gt=0, description="Older data is suspect and decays (the seed's 3-5 s lag).")
    stale_after_s: float = Field(5.0, gt=0, description="Older data counts as saturated; the instance is out.")
    window_s: float = Field(10.0, gt=0, description="Sliding window of the router's own observations.")

    @model_validator(mode="after")
    def _ordered(self) -> ScrapeSettings:
        if self.suspect_after_s > self.stale_after_s:
            raise ValueError("suspect_after_s must not exceed stale_after_s")
        return self


class FleetSettings(ContractModel):
    """The instances the router may send traffic to."""

    instances: list[InstanceSpec] = Field(min_length=1)

    @field_validator("instances")
    @classmethod
    def _unique_ids(cls, instances: list[InstanceSpec]) -> list[InstanceSpec]:
        seen: set[str] = set()
        for spec in instances:
            if spec.id in seen:
                raise ValueError(f"duplicate instance id {spec.id!r}")
            seen.add(spec.id)
        return instances


class HealthBand(ContractModel):
    """Where one metric turns a fleet-grid cell yellow and red (a value at or above the bound)."""

    yellow: float = Field(ge=0)
    red: float = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> HealthBand:
        if self.yellow > self.red:
            raise ValueError("yellow must not exceed red")
        return self


class HealthThresholds(ContractModel):
    """The fleet health grid's colours per metric; a cell takes its worst metric's colour.

    Defaults (common operator practice): KV-cache 0.90 / 0.95, queue 10 / 50 waiting, error rate
    1% / 5%, p95 TTFT 2000 / 5000 ms (set these to your SLO). A cell whose state is older than
    ``stale_after_s`` (or that the router marks stale) is grey, whatever its values.
    """

    kv_cache_usage: HealthBand = HealthBand(yellow=0.90, red=0.95)
    queue: HealthBand = HealthBand(yellow=10, red=50)
    error_rate: HealthBand = HealthBand(yellow=0.01, red=0.05)
    ttft_p95_ms: HealthBand = HealthBand(yellow=2000, red=5000)
    stale_after_s: float = Field(5.0, gt=0, description="Match fleet.scrape.stale_after_s.")


class AppSettings(ContractModel):
    """The Streamlit app."""

    host: str = "127.0.0.1"
    port: int = Field(8501, ge=0, le=65535)
    health: HealthThresholds = HealthThresholds()


def _default_constraints() -> list[ConstraintSpec]:
    return [
        ConstraintSpec(name="kv-cache", metric="kv_cache_usage", op="<=", threshold=0.85, enter_below=0.80),
        ConstraintSpec(name="queue", metric="queue", op="<=", threshold=10),
    ]


class RouteLensConfig(ContractModel):
    """The whole ``routelens.yaml``."""

    router: RouterSettings = RouterSettings()
    gateway: GatewaySettings = GatewaySettings()
    storage: StorageSettings = StorageSettings()
    fleet: FleetSettings
    constraints: list[ConstraintSpec] = Field(default_factory=_default_constraints)
    scoring: ScoringSettings = ScoringSettings()
    models: dict[str, ModelProfile] = {}
    scrape: ScrapeSettings = ScrapeSettings()
    sim: SimSettings = SimSettings()
    app: AppSettings = AppSettings()
    probes: ProbeSettings = ProbeSettings()
    experiments: ExperimentsSettings | None = Field(
        None, description="A/B arms, their traffic shares and a shadow policy (schemas.experiments_config)."
    )
    routing: RoutingSettings = Field(
        default_factory=lambda: RoutingSettings(), description="The routing policy file (schemas.routing_config).")
    shared: SharedSettings = Field(
        default_factory=lambda: SharedSettings(), description="State replicas share (schemas.shared_config).")
    throttles: ThrottleSettings = Field(
        default_factory=lambda: ThrottleSettings(), description="Prefilter and client buckets (schemas.shared_config).")
    resilience: ResilienceSettings = Field(
        default_factory=lambda: ResilienceSettings(),
        description="Breakers and typed fallbacks (schemas.resilience_config).")
    economics: EconomicsSettings = Field(
        default_factory=lambda: EconomicsSettings(),
        description="Router breakers, degraded modes, affinity, budgets (schemas.modes_config).")


# The arms' inline policies reuse the sections above, so that module imports this one: it comes last
# (schemas/__init__ imports this module first), then the model is completed with it.
from schemas.experiments_config import ExperimentsSettings  # noqa: E402
from schemas.modes_config import EconomicsSettings  # noqa: E402
from schemas.resilience_config import ResilienceSettings  # noqa: E402
from schemas.routing_config import RoutingSettings  # noqa: E402
from schemas.shared_config import SharedSettings, ThrottleSettings  # noqa: E402

RouteLensConfig.model_rebuild()
