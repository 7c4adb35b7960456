"""Feedback across gateway replicas: one verdict per request id, and what every replica learns from it.

* **One verdict per request id.** A claim on ``verdict:<request id>`` (:meth:`SharedState.claim`:
  set if absent, answered by Redis itself when the replicas share one) makes a second verdict a
  409, through whichever worker it comes; this process remembers its own claims at once.
* **Verdicts from before a restart.** The claims start again with the gateway (and with the local
  Redis ``serve`` starts), so once a claim is taken the store is asked as well
  (:meth:`Verdicts.stored_before`): a verdict it holds makes a second one a 409 all the same.
* **Learning.** A verdict is published on the ``feedback`` channel: every replica, this one at once,
  updates its quality table and its router modes' misroute share from it, so a model's learned
  quality reads the same through any worker (a worker started later learns from then on).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from router_core.shared.base import SharedState

__all__ = ["CHANNEL", "VERDICT_TTL_S", "Verdicts"]

CHANNEL = "feedback"
VERDICT_TTL_S = 7 * 86_400.0  # how long another replica remembers that a request id has its verdict
Learn = Callable[[dict[str, Any]], None]
log = logging.getLogger(__name__)


class Verdicts:
    """Which request ids have a verdict, on every replica; and the verdicts every replica learns.

    Args:
        shared: The replicas' shared state (a :class:`~router_core.shared.base.MemoryShared`: this process alone).
        learn: Applies one published verdict here (``{model, instance, class, correct}``, model may be None).
    """

    def __init__(self, shared: SharedState, learn: Learn) -> None:
        self._shared = shared
        self._store_unsure = False  # the store's last answer to stored_before was a failure (logged once)
        shared.subscribe(CHANNEL, learn)

    async def claim(self, request_id: str) -> bool:
        """Take the request id's one verdict; False when it (already) has one, here or on another replica."""
        return await self._shared.claim(f"verdict:{request_id}", VERDICT_TTL_S)

    async def release(self, request_id: str) -> None:
        """Give the id back (its verdict was not taken: no trace for it)."""
        await self._shared.unclaim(f"verdict:{request_id}")

    async def stored_before(self, request_id: str, ask: Callable[[str], bool]) -> bool:
        """Whether the store holds a verdict on the id already: one given before a restart, which the claims forgot.

        Args:
            request_id: The request the verdict is on (its claim taken).
            ask: The hooks' ``has_stored_verdict``; may block, so it is called in a worker thread.

        Returns:
            What ``ask`` says; False when it raises. A store that cannot answer must not turn a valid
            verdict into an error: it is accepted as it was before the store was asked (the store
            still keeps the first verdict only). Logged at warning once, until the store answers again.
        """
        try:
            found = await asyncio.to_thread(ask, request_id)
        except Exception as exc:  # whatever the store's failure (it is not router_core's to know), the verdict stands
            if not self._store_unsure:
                self._store_unsure = True
                log.warning("feedback: the store cannot say whether request %r has a verdict already (%s: %s); "
                            "verdicts are accepted unchecked until it can", request_id, type(exc).__name__,
                            str(exc)[:200])
            return False
        if self._store_unsure:
            self._store_unsure = False
            log.info("feedback: the store answers again whether a request has a verdict")
        return found

    async def learn(self, model: str | None, instance: str | None, cls: str | None, correct: bool) -> None:
        """Have every replica learn one verdict (this one at once)."""
        await self._shared.publish(CHANNEL, {"model": model, "instance": instance, "class": cls, "correct": correct})
