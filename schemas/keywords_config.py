"""The ``routing.keywords`` section: rule-enhanced keyword scoring (seed 003 §2.1) as configuration."""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel

__all__ = ["KeywordScoring"]


class KeywordPattern(ContractModel):
    """One weighted pattern (a regular expression, matched case-insensitively)."""

    pattern: str
    weight: float


class KeywordScoring(ContractModel):
    """Weighted patterns whose total routes to ``target`` at or above ``threshold``."""

    target: str
    threshold: float = Field(5.0)
    patterns: list[KeywordPattern] = Field(min_length=1)
