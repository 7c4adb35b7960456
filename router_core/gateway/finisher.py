"""A request's last step, after its answer is on its way: count it, run its shadow, emit its one trace.

The gateway's handler returns its response and aiohttp writes it in the same turn of the event
loop; whatever is scheduled with ``call_soon`` runs after that write and before the loop reads the
next request (uvloop and asyncio both run ready callbacks before polling for I/O again). So the
trace's validation and encoding, the spool append, the Prometheus counters and a shadow decision
no longer sit between the upstream's answer and the client: at one connection that is about a
fifth of the gateway's own time per request. Nothing is lost to the deferral: the outcome
(status, ``total_ms``) is fixed when :meth:`TraceFinisher.finish` is called, and :meth:`flush`
(the gateway's shutdown) emits whatever is still queued.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from router_core.gateway.hooks import TraceHooks
from router_core.metrics import GatewayMetrics
from router_core.recorder import TraceRecorder
from schemas.common import OutcomeStatus
from schemas.trace import Outcome

log = logging.getLogger(__name__)

__all__ = ["TraceFinisher"]


class TraceFinisher:
    """Finishes requests' traces once their answers are written (see the module docstring)."""

    def __init__(self, hooks: Callable[[], TraceHooks], metrics: GatewayMetrics, perf: Callable[[], float]) -> None:
        self._hooks = hooks  # read at emit time: the gateway's hooks may be replaced after construction
        self._metrics = metrics
        self._perf = perf
        self._queue: deque[tuple[TraceRecorder, Outcome]] = deque()

    def finish(self, rec: TraceRecorder, t0: float, status: int, error: str | None = None, **usage: Any) -> None:
        """Fix the request's outcome now; count it and emit its trace once the answer is written."""
        outcome = Outcome(
            status=OutcomeStatus.OK if status < 400 and error is None else OutcomeStatus.ERROR,
            http_status=status,
            error_class=error,
            total_ms=(self._perf() - t0) * 1e3,
            **usage,
        )
        self._queue.append((rec, outcome))
        if len(self._queue) == 1:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # no loop (a synchronous caller): at once
                self.flush()

    def pending(self) -> int:
        """Traces finished but not yet emitted."""
        return len(self._queue)

    def flush(self) -> None:
        """Emit every queued trace (one failing never stops the others)."""
        while self._queue:
            rec, outcome = self._queue.popleft()
            try:
                self._emit(rec, outcome)
            except Exception:  # noqa: BLE001  (a bug here must not cost the other requests their traces)
                log.exception("finishing the trace of %s failed", rec.request_id)

    def _emit(self, rec: TraceRecorder, outcome: Outcome) -> None:
        model, instance = rec.selected or (None, None)
        self._metrics.record_request(model, instance, outcome.http_status or 0)
        for attempt in rec.attempts:
            self._metrics.record_attempt(attempt.instance, attempt.status.value)
        job, rec.pending_shadow = rec.pending_shadow, None
        if job is not None:  # the shadow decides once the response is on its way; the trace waits for it
            try:
                rec.shadow = job()
            except Exception:  # noqa: BLE001  (never lose the live trace to its shadow)
                log.exception("shadow decision of %s failed", rec.request_id)
        self._hooks().emit(rec.finish(outcome))
