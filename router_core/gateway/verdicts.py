"""Feedback across gateway replicas: one verdict per request id, and what every replica learns from it.

* **One verdict per request id.** A claim on ``verdict:<request id>`` (:meth:`SharedState.claim`:
  set if absent, answered by Redis itself when the replicas share one) makes a second verdict a
  409, through whichever worker it comes; this process remembers its own claims at once.
* **Verdicts from before a restart.** The claims start again with the gateway (and with the local
  Redis ``serve`` starts), so once a claim is taken the store is asked as well
  (:meth:`Verdicts.stored_before`): a verdict it holds makes a second one a 409 all the same, and
  so does one on its way to it (the hooks answer for what waits in their pipeline and in the
  store's, written or not). The verdicts this gateway's own spool held at its start, not yet
  delivered, are claimed before it takes requests (:meth:`Verdicts.hold`), in the shared state:
  with ``serve --workers N`` a second one is a 409 through any worker.
* **What remains.** With ``serve --workers N`` a worker reads its spool when it starts, and the
  workers start one after another (worker 0 last, once the others are ready): a verdict left
  undelivered in the spool of a worker not started yet is unknown to the workers already serving
  until that worker has started (and claimed it) or relayed it. So is one in the spool of a
  worker this ``serve`` does not run (fewer workers than the last), until it is relayed
  (``app.run.stranded``, within ``storage.flush_interval_ms``). With Elasticsearch and
  ``storage.elasticsearch.refresh: false``, a verdict written but not yet searchable (about 1 s).
* **Learning.** A verdict is published on the ``feedback`` channel: every replica, this one at once,
  updates its quality table and its router modes' misroute share from it, so a model's learned
  quality reads the same through any worker (a worker started later learns from then on).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from router_core.shared.base import SharedState

__all__ = ["CHANNEL", "VERDICT_TTL_S", "Verdicts"]

CHANNEL = "feedback"
VERDICT_TTL_S = 7 * 86_400.0  # how long another replica remembers that a request id has its verdict
_HOLD_AT_ONCE = 256  # claims of Verdicts.hold in flight together (one Redis round trip each)
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

    async def hold(self, request_ids: Sequence[str]) -> int:
        """Claim the ids of verdicts given before this start and not delivered yet (found in the gateway's spool).

        Called before the gateway takes requests: until its spool has been replayed to the store, the
        store knows nothing of them, and another worker (sharing the claims in Redis) not even that.
        Returns how many were taken here (the others were claimed already, by another replica).
        """
        taken = 0
        for i in range(0, len(request_ids), _HOLD_AT_ONCE):
            chunk = request_ids[i:i + _HOLD_AT_ONCE]
            taken += sum(await asyncio.gather(*(self.claim(request_id) for request_id in chunk)))
        if request_ids:
            log.info("feedback: %d verdicts given before this start wait in the spool; their requests are claimed "
                     "(%d here, %d by another replica already)", len(request_ids), taken, len(request_ids) - taken)
        return taken

    async def release(self, request_id: str) -> None:
        """Give the id back (its verdict was not taken: no trace for it)."""
        await self._shared.unclaim(f"verdict:{request_id}")

    async def stored_before(self, request_id: str, ask: Callable[[str], bool]) -> bool:
        """Whether the store holds a verdict on the id, or one on its way: one given before a restart, say.

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
