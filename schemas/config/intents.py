"""The ``routing.intents`` section: semantic intents from labelled example utterances."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from schemas.common import ContractModel
from schemas.paths import InputFile

__all__ = ["IntentSettings", "Threshold"]

Threshold = Literal["calibrated"] | float


class IntentSettings(ContractModel):
    """Where the routes' examples are, how the two classifier paths run and when they abstain.

    A threshold of ``"calibrated"`` is picked per route set from held-out folds of the training
    examples: the ``calibration_quantile`` of the in-scope held-out confidences, so about
    ``1 - calibration_quantile`` of in-scope queries clear it.
    """

    routes: InputFile = Field(description="YAML file: route name -> example utterances; relative to the config file.")
    max_tokens: int = Field(512, gt=0, description="Input is cut here before classification (seed: 512).")
    fast_threshold: Threshold = Field("calibrated", description="Fast path: below it, escalate or abstain.")
    embedding_threshold: Threshold = Field("calibrated", description="Embedding path: below it, abstain.")
    embedding_precision: Literal["int8", "fp32"] = Field(
        "int8", description="MiniLM's Linear layers as dynamically quantised int8 (about 4x less weight memory per "
                            "query, same evaluation figures) or the published fp32 weights.")
    escalate: bool = Field(True, description="Run the embedding path when the fast path is below its threshold.")
    escalate_band: float = Field(
        0.75, ge=0, le=1, description="Escalate only from this share of the fast threshold up: further below, "
                                      "the fast path's doubt is an abstention (out-of-scope queries land there).")
    escalate_needs_agreement: bool = Field(
        True, description="An escalated verdict stands only when it names the fast path's nearest route.")
    k_min: int = Field(3, ge=1, description="Fewest capability centroids per route (K-means).")
    k_max: int = Field(5, ge=1, description="Most capability centroids per route.")
    examples_per_centroid: int = Field(15, ge=1, description="K = clamp(n // this, k_min, k_max), at most n.")
    calibration_quantile: float = Field(0.05, gt=0, lt=0.5, description="Share of in-scope held-out below it.")
    folds: int = Field(5, ge=2, le=20, description="Held-out folds for calibration.")
    seed: int = Field(0, description="Seeds folds, K-means and the linear model.")

    @model_validator(mode="after")
    def _check(self) -> IntentSettings:
        if self.k_min > self.k_max:
            raise ValueError(f"k_min {self.k_min} > k_max {self.k_max}")
        for name in ("fast_threshold", "embedding_threshold"):
            value = getattr(self, name)
            if not isinstance(value, str) and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be 'calibrated' or in [0, 1], not {value}")
        return self
