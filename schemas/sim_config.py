"""The ``sim:`` section of ``routelens.yaml``: the simulated fleet's behaviour."""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel

__all__ = ["SimModelProfile", "SimSettings"]


class SimModelProfile(ContractModel):
    """Behaviour of one model in the simulator."""

    base_latency_ms: float = Field(20.0, ge=0)
    decode_tps: float = Field(400.0, gt=0, description="Output tokens per second.")
    prefill_tps: float = Field(8000.0, gt=0, description="Prompt tokens per second.")
    max_concurrency: int = Field(16, ge=1)
    kv_tokens: int = Field(65536, gt=0, description="Tokens the KV cache holds.")


class SimSettings(ContractModel):
    """Simulator knobs; see sim/."""

    time_scale: float = Field(1.0, gt=0, description="2.0 runs twice as fast as real time.")
    zero_delay: bool = False
    seed: int = 0
    models: dict[str, SimModelProfile] = {}
