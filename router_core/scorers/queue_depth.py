"""Short queue: ``1 - queue / queue_norm`` (the seed's ``queue`` term)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint

__all__ = ["QueueDepthScorer"]


class QueueDepthScorer(PluginBase):
    """Scores short queues.

    What it does: prefers short queues. Inputs: staleness-adjusted waiting requests.
    Parameters: ``queue_norm`` (a queue that long scores 0; derived from ``scoring.queue_norm``).
    Category: scorer, term ``queue``.
    """

    TYPE: ClassVar[str] = "queue-depth-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "queue"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """Parameters of :class:`QueueDepthScorer`."""

        queue_norm: float = Field(10.0, gt=0, description="A queue this long scores 0.")

    params: Params

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return ``1 - queue/queue_norm`` per candidate."""
        norm = self.params.queue_norm
        return [1.0 - c.eff.queue / norm for c in pool]
