"""Feedback across gateway replicas: one verdict per request id, and what every replica learns from it.

* **One verdict per request id.** A claim on ``verdict:<request id>`` (:meth:`SharedState.claim`:
  set if absent, answered by Redis itself when the replicas share one) makes a second verdict a
  409, through whichever worker it comes; this process remembers its own claims at once.
* **Learning.** A verdict is published on the ``feedback`` channel: every replica, this one at once,
  updates its quality table and its router modes' misroute share from it, so a model's learned
  quality reads the same through any worker (a worker started later learns from then on).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from router_core.shared.base import SharedState

__all__ = ["CHANNEL", "VERDICT_TTL_S", "Verdicts"]

CHANNEL = "feedback"
VERDICT_TTL_S = 7 * 86_400.0  # how long another replica remembers that a request id has its verdict
Learn = Callable[[dict[str, Any]], None]


class Verdicts:
    """Which request ids have a verdict, on every replica; and the verdicts every replica learns.

    Args:
        shared: The replicas' shared state (a :class:`~router_core.shared.base.MemoryShared`: this process alone).
        learn: Applies one published verdict here (``{model, instance, class, correct}``, model may be None).
    """

    def __init__(self, shared: SharedState, learn: Learn) -> None:
        self._shared = shared
        shared.subscribe(CHANNEL, learn)

    async def claim(self, request_id: str) -> bool:
        """Take the request id's one verdict; False when it (already) has one, here or on another replica."""
        return await self._shared.claim(f"verdict:{request_id}", VERDICT_TTL_S)

    async def release(self, request_id: str) -> None:
        """Give the id back (its verdict was not taken: no trace for it)."""
        await self._shared.unclaim(f"verdict:{request_id}")

    async def learn(self, model: str | None, instance: str | None, cls: str | None, correct: bool) -> None:
        """Have every replica learn one verdict (this one at once)."""
        await self._shared.publish(CHANNEL, {"model": model, "instance": instance, "class": cls, "correct": correct})
