"""The ``sim:`` section of ``routelens.yaml``: the simulated fleet's behaviour.

Every field has a default, so ``sim: {models: {m: {decode_tps: 120}}}`` stays valid; the
simulator's built-in model mix (``sim/behaviour.py``) fills the profiles of the seed's models.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import ContractModel

__all__ = ["CostClass", "Quantization", "QueryClassName", "SimModelProfile", "SimSettings"]

Quantization = Literal["fp16", "bf16", "fp8", "int8", "int4"]
CostClass = Literal["economy", "standard", "premium"]
QueryClassName = Literal["contract", "ticket", "code", "math", "chat"]
Probability = Annotated[float, Field(ge=0, le=1)]


class SimModelProfile(ContractModel):
    """Behaviour of one model in the simulator: speed, capacity, warm-up, accuracy and price class."""

    base_latency_ms: float = Field(20.0, ge=0, description="Fixed overhead before the first token.")
    decode_tps: float = Field(400.0, gt=0, description="Output tokens per second.")
    prefill_tps: float = Field(8000.0, gt=0, description="Prompt tokens per second.")
    max_concurrency: int = Field(16, ge=1, description="Sequences run at once; more requests queue.")
    kv_tokens: int = Field(65536, gt=0, description="Tokens the KV cache holds.")
    kv_block_tokens: int = Field(16, gt=0, description="Tokens per KV block (vLLM's block size).")
    warmup_s: float = Field(
        0.0, ge=0, description="Simulated seconds from cold start to full speed and accuracy (the seed: 90)."
    )
    cold_speed: float = Field(0.3, gt=0, le=1, description="Share of full speed right after a start.")
    cold_accuracy: float = Field(0.7, ge=0, le=1, description="Share of full accuracy right after a start.")
    quantization: Quantization = "fp16"
    math_penalty: float = Field(
        0.28, ge=0, le=1, description="Relative accuracy an int4 model loses on maths prompts (the seed: 28%)."
    )
    cost_class: CostClass = "standard"
    accuracy: dict[QueryClassName, Probability] = Field(
        default_factory=dict, description="Probability of a correct answer per query class."
    )
    default_accuracy: float = Field(0.9, ge=0, le=1, description="For classes missing from ``accuracy``.")


class SimSettings(ContractModel):
    """Simulator knobs; see sim/."""

    time_scale: float = Field(1.0, gt=0, description="2.0 runs twice as fast as real time.")
    zero_delay: bool = Field(False, description="Never sleep: serve as fast as the CPU allows.")
    warm_start: bool = Field(False, description="Instances start already warm (a restart is still cold).")
    seed: int = 0
    models: dict[str, SimModelProfile] = {}
