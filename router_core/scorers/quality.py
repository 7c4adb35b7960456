"""Answer quality for this request's class: P(correct) per (model, class), refined by feedback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, DecisionContext

__all__ = ["QualityScorer"]


class QualityScorer:
    """Scores expected answer quality for the request class.

    What it does: prefers the model most likely to answer this kind of query well.
    Inputs: the request's intent class and ``ctx.quality`` (prior from ``models.<m>.quality``,
    updated from ``POST /v1/feedback``). Unknown pairs score ``default``.
    Parameters: ``default``. Category: scorer, term ``quality``.
    """

    TYPE: ClassVar[str] = "quality-scorer"
    STATE_ONLY: ClassVar[bool] = False

    def __init__(self, default: float = 0.5, name: str = "quality") -> None:
        self.name = name
        self.default = default

    def score(self, pool: Sequence[Candidate], ctx: DecisionContext) -> list[float]:
        """Return the quality estimate of each candidate's model for the request's class."""
        table, cls = ctx.quality, ctx.intent or ""
        return [table.get((c.spec.model, cls), self.default) for c in pool]
