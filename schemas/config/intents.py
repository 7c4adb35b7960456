"""The ``routing.intents`` section: semantic intents from labelled example utterances."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from schemas.common import ContractModel
from schemas.paths import InputFile

__all__ = ["IntentSettings", "Threshold"]

Threshold = Literal["calibrated"] | float


class IntentSettings(ContractModel):
    """Where the routes' examples are, how the three paths (fast, early, embedding) run and when they abstain.

    A threshold of ``"calibrated"`` is picked per route set from held-out folds of the training
    examples: the fast path's accept threshold for ``fast_precision``, the embedding path's so that
    at most ``calibration_quantile`` of the held-out in-scope examples abstain.
    """

    routes: InputFile = Field(description="YAML file: route name -> example utterances; relative to the config file.")
    max_tokens: int = Field(512, gt=0, description="Input is cut here before classification (seed: 512).")
    fast_threshold: Threshold = Field(
        "calibrated", description="Fast path: from it up its verdict stands; below it the embedding path decides (or, "
                                  "without the model, the fast path abstains).")
    embedding_threshold: Threshold = Field(
        "calibrated",
        description="Embedding path (MiniLM and character n-grams in one linear model): below it, abstain.")
    embedding_precision: Literal["int8", "fp32"] = Field(
        "int8", description="MiniLM's Linear layers as dynamically quantised int8 (about 4x less weight memory per "
                            "query, same evaluation figures) or the published fp32 weights.")
    embedding_max_tokens: int = Field(
        128, ge=8, le=256,
        description="MiniLM reads at most this many WordPiece tokens of a query (the length it was trained on); "
                    "256, its published cut, takes about twice the time on a long query (31 against 15 ms on one "
                    "thread here). The character n-grams read up to max_tokens.")
    escalate: bool = Field(True, description="Run the embedding path when the fast path is below its threshold.")
    early_exit_layers: int = Field(
        2, ge=0, le=5,
        description="Embedding path: first read the query with only this many of MiniLM's six layers; a verdict "
                    "the calibration says the whole model would not better (and no nearer to out-of-scope text "
                    "than the fast path allows) stands as path `early`, at about a third of the cost; the rest "
                    "go on through the remaining layers. 0: always all six.")
    fast_precision: float = Field(
        0.98, gt=0.5, le=1.0,
        description="Fast path: a calibrated accept threshold keeps held-out verdicts above it right this share "
                    "of the time; the rest take the embedding path.")
    fast_unseen_share: float = Field(
        0.1, ge=0, lt=1,
        description="Fast path and early exit: the share of a left-out route's examples (the nearest out-of-scope "
                    "queries) whose confidence may reach the accept (exit) threshold. Lower: more abstentions, more "
                    "queries on the embedding path.")
    k_min: int = Field(3, ge=1, description="Fewest capability centroids per route (K-means; the seed's method, "
                                            "which `routelens intents eval --method centroids` measures).")
    k_max: int = Field(5, ge=1, description="Most capability centroids per route.")
    examples_per_centroid: int = Field(15, ge=1, description="K = clamp(n // this, k_min, k_max), at most n.")
    calibration_quantile: float = Field(0.03, gt=0, lt=0.5,
                                        description="Share of in-scope held-out examples allowed to abstain.")
    folds: int = Field(5, ge=2, le=20, description="Held-out folds for calibration.")
    seed: int = Field(0, description="Seeds folds, K-means, the linear models and the background's random strings.")

    @model_validator(mode="after")
    def _check(self) -> IntentSettings:
        if self.k_min > self.k_max:
            raise ValueError(f"k_min {self.k_min} > k_max {self.k_max}")
        for name in ("fast_threshold", "embedding_threshold"):
            value = getattr(self, name)
            if not isinstance(value, str) and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be 'calibrated' or in [0, 1], not {value}")
        return self
