"""Reliable instances first: ``1 - error_rate`` over the router's own window (the seed's ``error`` term)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint

__all__ = ["ErrorRateScorer"]


class ErrorRateScorer(PluginBase):
    """Scores reliability.

    What it does: penalises failing instances. Inputs: ``error_rate`` of the observation
    window (None, no traffic yet, scores 1). Parameters: none. Category: scorer, term ``error``.
    """

    TYPE: ClassVar[str] = "error-rate-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "error"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """This scorer takes no parameters."""

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return ``1 - error_rate`` per candidate."""
        return [1.0 if c.state.error_rate is None else 1.0 - c.state.error_rate for c in pool]
