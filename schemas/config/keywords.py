"""The ``routing.keywords`` section: rule-enhanced keyword scoring (seed 003 §2.1) as configuration.

::

    routing:
      keywords:
        target: qwen-vl          # routed to when the score is at or above the threshold
        otherwise: llama3-8b     # below it (omit: normal routing decides)
        threshold: 5
        patterns:
          - {pattern: "(年报|财报|annual report)", weight: 3}
          - {pattern: "(PDF|扫描件|截图)", weight: 2}
          - {pattern: "(表格|数据|数字)", weight: 1}
        intent_bonus:
          - {intent: finance, min_confidence: 0.7, bonus: 4}
        load_adjust: {metric: kv_cache_usage, above: 0.85, factor: 0.6}

``score = Σ weights of the patterns that match + the intent's bonus``, then multiplied by
``load_adjust.factor`` when the target is loaded. ``data/keywords/seed003.yaml`` is the seed verbatim.
"""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from schemas.common import ContractModel

__all__ = ["IntentBonus", "KeywordPattern", "KeywordScoring", "LoadAdjust", "LoadMetric"]

LoadMetric = Literal[
    "kv_cache_usage", "queue", "running", "error_rate",
    "p50_latency_ms", "p95_latency_ms", "ttft_p95_ms", "e2e_p95_ms",
]


class KeywordPattern(ContractModel):
    """One weighted pattern: a regular expression (Chinese and English alike) searched anywhere in the query."""

    pattern: str = Field(min_length=1, description="Python regular expression; matching it adds ``weight`` once.")
    weight: float = Field(allow_inf_nan=False, description="Added to the score when the pattern matches (may be < 0).")
    flags: str = Field(
        "i", pattern=r"^[ims]*$",
        description="Inline flags: i ignore case (default), m multiline, s dot-all; '' is case-sensitive.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from exc
        if compiled.fullmatch(""):
            raise ValueError(f"{value!r} matches the empty string, so it would match every query")
        return value


class IntentBonus(ContractModel):
    """A bonus for requests whose intent is ``intent`` with confidence strictly above ``min_confidence``."""

    intent: str = Field(min_length=1, description="The intent label (schemas.config.intents routes).")
    min_confidence: float = Field(0.7, ge=0, le=1, description="Applies when the confidence is strictly greater.")
    bonus: float = Field(4.0, allow_inf_nan=False)


class LoadAdjust(ContractModel):
    """Down-weight the score while the target model's instances are loaded (the seed's ``gpu_util > 85``).

    The engines export no GPU utilisation, so the default gauge is ``kv_cache_usage`` (0-1): it is
    what saturates first on a vLLM server and what the router already scrapes. The value is the
    **mean** over the target model's instances that report the gauge and are not stale: the picker
    spreads requests over them, so a new request meets the pool's average load, not its hottest
    node (with one instance, as in the seed, it is that node's value). No value at all: no
    adjustment, and the result says so.
    """

    metric: LoadMetric = Field("kv_cache_usage", description="An InstanceSnapshot gauge.")
    above: float = Field(0.85, ge=0, allow_inf_nan=False, description="Adjust when the mean is strictly greater.")
    factor: float = Field(0.6, gt=0, le=1, description="The score is multiplied by this, in (0, 1].")


class KeywordScoring(ContractModel):
    """Weighted patterns, an intent bonus and a load adjustment whose total routes to ``target``."""

    target: str = Field(min_length=1, description="Model routed to when the score is >= threshold.")
    otherwise: str | None = Field(None, description="Model routed to below the threshold (None: normal routing).")
    threshold: float = Field(5.0, allow_inf_nan=False)
    patterns: list[KeywordPattern] = Field(min_length=1)
    intent_bonus: list[IntentBonus] = []
    load_adjust: LoadAdjust | None = Field(None, description="None: the score is never load-adjusted.")
    max_chars: int = Field(4000, gt=0, description="Only the query's first max_chars characters are searched.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.otherwise == self.target:
            raise ValueError(f"otherwise must differ from target ({self.target!r})")
        labels = [b.intent for b in self.intent_bonus]
        if len(labels) != len(set(labels)):
            raise ValueError(f"intent_bonus lists an intent twice: {labels}")
        return self

    @classmethod
    def seed_example(cls) -> KeywordScoring:
        """Seed 003 §2.1 verbatim: qwen-vl at a score of 5 or more, llama3-8b below it."""
        return cls(
            target="qwen-vl",
            otherwise="llama3-8b",
            threshold=5,
            patterns=[
                KeywordPattern(pattern="(年报|财报|annual report)", weight=3),
                KeywordPattern(pattern="(PDF|扫描件|截图)", weight=2),
                KeywordPattern(pattern="(表格|数据|数字)", weight=1),
            ],
            intent_bonus=[IntentBonus(intent="finance", min_confidence=0.7, bonus=4)],
            load_adjust=LoadAdjust(metric="kv_cache_usage", above=0.85, factor=0.6),
        )
