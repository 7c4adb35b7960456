"""The whole ``routelens.yaml``: :class:`RouteLensConfig`, and the serving sections no other section needs.

Raw dicts exist only at the YAML boundary; :func:`schemas.yamlconf.parse_yaml_model` turns text
into these models and names file, line and field for every problem. Each other section has a
module of its own in this package; this one imports them all and nothing imports it but
``schemas.config`` itself.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from schemas.common import ContractModel
from schemas.config.decision import ConstraintSpec, ModelProfile, RouterSettings, ScoringSettings
from schemas.config.economics import EconomicsSettings
from schemas.config.experiments import ExperimentsSettings
from schemas.config.otel import OtelSettings
from schemas.config.probes import ProbeSettings
from schemas.config.resilience import ResilienceSettings
from schemas.config.routing import RoutingSettings
from schemas.config.shared import SharedSettings, ThrottleSettings
from schemas.config.sim import SimSettings
from schemas.config.storage import StorageSettings
from schemas.fleet import InstanceSpec

__all__ = [
    "AppSettings",
    "FleetSettings",
    "GatewaySettings",
    "HealthBand",
    "HealthThresholds",
    "RouteLensConfig",
    "ScrapeSettings",
]


class GatewaySettings(ContractModel):
    """The OpenAI-compatible HTTP gateway."""

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    body_timeout_s: float = Field(
        30.0, gt=0,
        description="Longest wait for a request's body once its headers arrived; past it the gateway answers 408 "
        "(request_timeout) and closes the connection.",
    )
    connect_timeout_s: float = Field(1.0, gt=0, description="TCP connect to an instance, per attempt.")
    upstream_timeout_s: float = Field(
        60.0, gt=0, description="Total time of one non-stream attempt (a stream's attempt is bounded by "
        "connect_timeout_s, first_byte_timeout_s and idle_timeout_s instead)."
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
    stage_timers: bool = Field(
        False,
        description="Count the event loop's CPU time in each stage of the chat route into "
        "routelens_gateway_stage_cpu_seconds{stage} (a cost "
        "budget to read; off in production, where the per-request timing costs more than it tells).",
    )
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


class ScrapeSettings(ContractModel):
    """How live state is collected from instances' ``/metrics``.

    Warm-up: each scrape gives an instance's ``warmup_progress`` (0-1, the ``warmup`` score term)
    from the first of: the engine's own warm-up gauge (only the simulator exports one,
    ``routelens_sim_warmup_progress``); its process uptime, ``min(1, (scrape time -
    process_start_time_seconds) / warmup_s)``, from the gauge prometheus_client exports by default
    (vLLM has it; TGI and SGLang do not); else 1.0, assumed warm. The snapshot's
    ``warmup_source`` (``gauge``, ``uptime``, ``assumed``) says which, in every trace. An
    instance's restart (a newer start time) starts the ramp again; the gateway's own does not (the
    uptime is the instance's: instances up for hours are warm from the first scrape). A warming
    instance scores lower where the ``warmup`` term has a weight (the ``seed-instance-score``
    preset; ``balanced`` gives it none) and leaves the feasible set only under a
    ``warmup_progress`` constraint. The ramp counts from the process start and vLLM answers only
    once its model is loaded, so count the load time in ``warmup_s``. Clocks are assumed in sync
    (a start time ahead of the gateway's clock counts as just started).
    """

    interval_s: float = Field(1.0, gt=0)
    timeout_s: float = Field(0.5, gt=0)
    suspect_after_s: float = Field(3.0, gt=0, description="Older data is suspect and decays (the seed's 3-5 s lag).")
    stale_after_s: float = Field(5.0, gt=0, description="Older data counts as saturated; the instance is out.")
    window_s: float = Field(10.0, gt=0, description="Sliding window of the router's own observations.")
    warmup_s: float = Field(
        90.0, ge=0, description="Seconds from an instance's process start to warm, where it exports no warm-up "
        "gauge (the seed: 90 s); 0: such instances count as warm at once.")

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
    stale_after_s: float = Field(5.0, gt=0, description="Match scrape.stale_after_s.")


class AppSettings(ContractModel):
    """The Streamlit app."""

    host: str = "127.0.0.1"
    port: int = Field(8501, ge=0, le=65535)
    health: HealthThresholds = HealthThresholds()
    cost_unit: str = Field(
        "cost units", min_length=1, max_length=40,
        description="What one unit of a request's cost (fleet.instances[].cost: base, input_per_1m, "
        "output_per_1m) is called on the app's pages "
        "(e.g. 'USD', 'credits').",
    )
    public_url: str | None = Field(
        None, description="The app's address as operators reach it (e.g. 'https://routelens.example.com'): "
        "exported spans link to each request's 'Why this model' page with it (routelens.trace_url).")


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
        None, description="A/B arms, their traffic shares and a shadow policy (schemas.config.experiments)."
    )
    routing: RoutingSettings = Field(
        default_factory=RoutingSettings, description="The routing policy file (schemas.config.routing).")
    shared: SharedSettings = Field(
        default_factory=SharedSettings, description="State replicas share (schemas.config.shared).")
    throttles: ThrottleSettings = Field(
        default_factory=ThrottleSettings, description="Prefilter and client buckets (schemas.config.shared).")
    resilience: ResilienceSettings = Field(
        default_factory=ResilienceSettings,
        description="Breakers and typed fallbacks (schemas.config.resilience).")
    economics: EconomicsSettings = Field(
        default_factory=EconomicsSettings,
        description="Router breakers, degraded modes, affinity, budgets (schemas.config.economics).")
    otel: OtelSettings = Field(
        default_factory=OtelSettings,
        description="OpenTelemetry export of every decision over OTLP/HTTP (schemas.config.otel).")

    @model_validator(mode="after")
    def _probe_overrides_within(self) -> RouteLensConfig:
        # An instance's probes override may ask for less than the probes section, never more.
        for i, spec in enumerate(self.fleet.instances):
            over = spec.probes
            if over is not None and (problems := over.problems(self.probes.kinds, self.probes.interval_s)):
                raise ValueError(f"fleet.instances[{i}].probes ({spec.id}): " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _degraded_reachable(self) -> RouteLensConfig:
        # Degraded steps run when a decision has no target; failing open always leaves it every candidate.
        steps = self.economics.degraded.steps
        if steps != ["reject"] and self.router.on_empty == "fail_open":
            raise ValueError(f"economics.degraded.steps {steps} never run while router.on_empty is fail_open "
                             "(failing open ranks every candidate, so no request is left without a target): "
                             "set router.on_empty: reject to run them when nothing is feasible")
        return self

