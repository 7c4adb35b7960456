"""Short queue: ``1 - queue / queue_norm`` (the seed's ``queue`` term)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, DecisionContext

__all__ = ["QueueDepthScorer"]


class QueueDepthScorer:
    """Scores short queues.

    What it does: prefers short queues. Inputs: staleness-adjusted waiting requests.
    Parameters: ``scoring.queue_norm`` (a queue that long scores 0). Category: scorer, term ``queue``.
    """

    TYPE: ClassVar[str] = "queue-depth-scorer"
    STATE_ONLY: ClassVar[bool] = True

    def __init__(self, name: str = "queue") -> None:
        self.name = name

    def score(self, pool: Sequence[Candidate], ctx: DecisionContext) -> list[float]:
        """Return ``1 - queue/queue_norm`` per candidate."""
        norm = ctx.scoring.queue_norm
        return [1.0 - c.eff.queue / norm for c in pool]
