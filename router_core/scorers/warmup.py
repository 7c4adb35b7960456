"""Warm instances first: the snapshot's warm-up progress (the seed's ``warmup`` term)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint

__all__ = ["WarmupScorer"]


class WarmupScorer(PluginBase):
    """Scores warm-up progress.

    What it does: a cold instance (after start or restart) scores low until warmed up.
    Inputs: ``warmup_progress`` 0-1, as the state view derived it (``warmup_source``): the
    engine's warm-up gauge, else its process uptime over ``scrape.warmup_s``, else 1.0 assumed
    (see :mod:`router_core.state.warmup`). None (no scrape yet, or a snapshot stored before
    ``warmup_source`` existed) counts as warm, as it always did. It only scores: a cold instance
    leaves the feasible set only under a ``warmup_progress`` constraint.
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
