"""Load balance: prefer instances with free sequence slots."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint

__all__ = ["BalanceScorer"]


class BalanceScorer(PluginBase):
    """Scores free sequence slots.

    What it does: ``1 - running / max_concurrency`` of the model. Inputs: staleness-adjusted
    running gauge, model profile. Parameters: none. Category: scorer, term ``balance``.
    """

    TYPE: ClassVar[str] = "balance-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "balance"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """This scorer takes no parameters."""

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return the free share of sequence slots per candidate."""
        profile = self.handle.profile
        return [1.0 - c.eff.running / profile(c.spec.model).max_concurrency for c in pool]
