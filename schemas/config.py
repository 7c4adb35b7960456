"""The ``routelens.yaml`` configuration, validated at load time.

Raw dicts exist only at the YAML boundary; :func:`schemas.yamlconf.parse_yaml_model` turns text
into these models and names file, line and field for every problem.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from schemas.common import ContractModel
from schemas.fleet import InstanceSpec
from schemas.sim_config import SimModelProfile, SimSettings
from schemas.storage_config import StorageSettings

__all__ = [
    "AppSettings",
    "ConstraintSpec",
    "FleetSettings",
    "GatewaySettings",
    "RouteLensConfig",
    "RouterSettings",
    "ScoringSettings",
    "ScrapeSettings",
    "SimModelProfile",
    "SimSettings",
    "StorageSettings",
]

Metric = Literal["kv_cache_usage", "queue", "running", "error_rate", "warmup_progress"]
Op = Literal["<=", "<", ">=", ">"]


class RouterSettings(ContractModel):
    """Identity of the router build and privacy settings."""

    version: str = "routelens-0.1.0"
    hash_key_env: str | None = Field(
        None, description="Environment variable holding the HMAC key for query hashes."
    )
    analyse_max_chars: int = Field(20_000, gt=0, description="Longer input is cut for analysis.")


class GatewaySettings(ContractModel):
    """The OpenAI-compatible HTTP gateway."""

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    connect_timeout_s: float = Field(1.0, gt=0)
    upstream_timeout_s: float = Field(60.0, gt=0)
    max_attempts: int = Field(2, ge=1, le=10, description="Instances tried before giving up.")
    max_connections: int = Field(512, ge=1)


class ConstraintSpec(ContractModel):
    """A hard constraint: an instance is feasible only while ``metric op threshold`` holds."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    metric: Metric
    op: Op = "<="
    threshold: float


class ScoringSettings(ContractModel):
    """Weights of the seed's instance-score preset."""

    preset: Literal["seed-instance-score"] = "seed-instance-score"
    mem: float = Field(0.4, ge=0)
    queue: float = Field(0.3, ge=0)
    warmup: float = Field(0.2, ge=0)
    error: float = Field(0.1, ge=0)
    queue_norm: float = Field(10.0, gt=0, description="Queue length that scores zero.")


class ScrapeSettings(ContractModel):
    """How live state is collected from instances' ``/metrics``."""

    interval_s: float = Field(1.0, gt=0)
    timeout_s: float = Field(0.5, gt=0)
    stale_after_s: float = Field(5.0, gt=0)


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


class AppSettings(ContractModel):
    """The Streamlit app."""

    host: str = "127.0.0.1"
    port: int = Field(8501, ge=0, le=65535)


def _default_constraints() -> list[ConstraintSpec]:
    return [
        ConstraintSpec(name="kv-cache", metric="kv_cache_usage", op="<=", threshold=0.85),
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
    scrape: ScrapeSettings = ScrapeSettings()
    sim: SimSettings = SimSettings()
    app: AppSettings = AppSettings()
