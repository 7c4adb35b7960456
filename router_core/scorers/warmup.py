"""Warm instances first: the warm-up progress gauge (the seed's ``warmup`` term)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint

__all__ = ["WarmupScorer"]


class WarmupScorer(PluginBase):
    """Scores warm-up progress.

    What it does: a cold instance (after start or restart) scores low until warmed up.
    Inputs: ``warmup_progress`` 0-1; engines that do not report it count as warm.
    Parameters: none. Category: scorer, term ``warmup``.
    """

    TYPE: ClassVar[str] = "warmup-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "warmup"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """This scorer takes no parameters."""

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return the warm-up progress per candidate."""
        return [1.0 if c.state.warmup_progress is None else c.state.warmup_progress for c in pool]
