"""Cheaper models first, relative to the pool: the cheapest scores 1, the dearest 0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint

__all__ = ["CostScorer"]


class CostScorer(PluginBase):
    """Scores relative cheapness.

    What it does: ``(max - cost) / (max - min)`` over the pool's per-request base costs (all
    equal: all 1). Inputs: ``InstanceSpec.cost.base``. Parameters: none. Category: scorer, term ``cost``.
    """

    TYPE: ClassVar[str] = "cost-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "cost"
    STATE_ONLY: ClassVar[bool] = False

    class Params(PluginParams):
        """This scorer takes no parameters."""

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return the relative cheapness per candidate."""
        costs = [c.spec.cost.base for c in pool]
        low, high = min(costs, default=0.0), max(costs, default=0.0)
        if high == low:
            return [1.0] * len(pool)
        return [(high - cost) / (high - low) for cost in costs]
