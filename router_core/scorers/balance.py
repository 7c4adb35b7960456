"""Load balance: prefer instances with free sequence slots."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, DecisionContext
from router_core.scorers._common import profile_of

__all__ = ["BalanceScorer"]


class BalanceScorer:
    """Scores free sequence slots.

    What it does: ``1 - running / max_concurrency`` of the model. Inputs: staleness-adjusted
    running gauge, model profile. Parameters: none. Category: scorer, term ``balance``.
    """

    TYPE: ClassVar[str] = "balance-scorer"
    STATE_ONLY: ClassVar[bool] = True

    def __init__(self, name: str = "balance") -> None:
        self.name = name

    def score(self, pool: Sequence[Candidate], ctx: DecisionContext) -> list[float]:
        """Return the free share of sequence slots per candidate."""
        return [1.0 - c.eff.running / profile_of(c, ctx).max_concurrency for c in pool]
