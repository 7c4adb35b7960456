"""A request's last step: count it and emit its one trace, durable before a whole answer is sent.

The trace goes to the hooks (the durable spool) before the handler returns its response, so a
client that got a whole answer has a trace even if the process is killed the next moment (the
kill -9 test in ``tests/e2e/test_ingest_reliability.py``). A stream is the exception: its chunks
are sent as they come (:func:`router_core.gateway.stages.respond.relay_answer` returns once the
last one is out), so its trace is finished after its last chunk, and a process killed mid-stream
leaves no trace of it. Only a request with a shadow decision waits: its shadow decides once the
answer is on its way (``call_soon``), then its trace is emitted;
:meth:`TraceFinisher.flush` (the gateway's shutdown) emits whatever is still queued.

Hooks that take plain values (``takes_plain``, the ingest pipeline's) get the recorder's values
unvalidated through ``emit_plain``, and the store validates them; other hooks get a validated
``DecisionTrace`` through ``emit``.

A trace that cannot be encoded because a string in it holds a lone surrogate (a header byte that
was not UTF-8) is handed over again with those bytes escaped (:mod:`router_core.gateway.trace_repair`),
and an ERROR says which trace and where: its decision is kept, never silently lost.

Tried and reverted: deferring every trace to after the answer (``call_soon``) took the trace's
validation, encoding and spool append off the latency path, but an answer could then reach the
client without a durable trace, which the kill -9 test caught.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from router_core.decide.recorder import TraceRecorder
from router_core.gateway.hooks import TraceHooks
from router_core.gateway.trace_repair import escape_surrogates
from router_core.metrics import GatewayMetrics
from schemas.common import OutcomeStatus
from schemas.trace import Outcome

log = logging.getLogger(__name__)

__all__ = ["TraceFinisher"]

_T = TypeVar("_T")


class TraceFinisher:
    """Counts requests and emits their traces (see the module docstring)."""

    def __init__(self, hooks: Callable[[], TraceHooks], metrics: GatewayMetrics, perf: Callable[[], float]) -> None:
        self._hooks = hooks  # read at emit time: the gateway's hooks may be replaced after construction
        self._metrics = metrics
        self._perf = perf
        self._queue: deque[tuple[TraceRecorder, Outcome]] = deque()

    def finish(self, rec: TraceRecorder, t0: float, status: int, error: str | None = None, **usage: Any) -> None:
        """Fix the request's outcome now; count it and emit its trace (after its shadow, if it has one)."""
        outcome = Outcome(
            status=OutcomeStatus.OK if status < 400 and error is None else OutcomeStatus.ERROR,
            http_status=status,
            error_class=error,
            total_ms=(self._perf() - t0) * 1e3,
            **usage,
        )
        if not rec.has_deferred_shadow:
            self._emit(rec, outcome)  # durable before the answer leaves
            self._time(rec, t0, outcome)  # the emit is on the request path: the router's time
            return
        self._time(rec, t0, outcome)
        self._queue.append((rec, outcome))
        if len(self._queue) == 1:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # no loop (a synchronous caller): at once
                self.flush()

    def _time(self, rec: TraceRecorder, t0: float, outcome: Outcome) -> None:
        """Observe the router's own and the upstream's time of a request an instance answered (seed 003 §1)."""
        if rec.answered is not None:
            self._metrics.record_routing_time(rec.attempts, (self._perf() - t0) * 1e3, outcome.total_ms,
                                              outcome.ttft_ms)

    def pending(self) -> int:
        """Traces waiting for their shadow decision."""
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
        if rec.has_deferred_shadow:  # the shadow decides once the response is on its way; the trace waits for it
            try:
                rec.run_shadow()
            except Exception:  # noqa: BLE001  (never lose the live trace to its shadow)
                log.exception("shadow decision of %s failed", rec.request_id)
        hooks = self._hooks()
        if hooks.takes_plain:  # a store that validates what it stores: no model here
            values = rec.plain(outcome)
            try:
                hooks.emit_plain(values)
            except (TypeError, ValueError) as exc:  # orjson: "str is not valid UTF-8"
                hooks.emit_plain(self._escaped(rec.request_id, values, exc))
        else:
            trace = rec.finish(outcome)
            try:
                hooks.emit(trace)
            except (TypeError, ValueError) as exc:  # pydantic's JSON: UnicodeEncodeError
                hooks.emit(self._escaped(rec.request_id, trace, exc))

    @staticmethod
    def _escaped(request_id: str, trace: _T, exc: Exception) -> _T:
        """``trace`` with its strings that are not UTF-8 escaped; ``exc`` again when it has none (another fault)."""
        escaped, where = escape_surrogates(trace)
        if not where:
            raise exc
        log.error("the trace of %s held text that is not UTF-8 (%s: %s); stored with those bytes escaped as \\xNN",
                  request_id, ", ".join(where[:8]), type(exc).__name__)
        return escaped  # type: ignore[no-any-return]

    @property
    def validates(self) -> bool:
        """True when traces are validated here (hooks that do not take plain values): then a prebuild helps."""
        return not self._hooks().takes_plain
