"""Traces emitted but not stored yet, for read-your-writes.

A client that asks for its trace right after the response finds it here until the store has it
(:meth:`TraceEmitter.pending <ingest.pipeline.emitter.TraceEmitter.pending>`). While the store is
behind, only the newest ``cap`` are kept: each holds its decision in memory. A trace's memory grows
with its candidates (about 2 kB each: 0.4 MB for a big fleet's 200), so the newest are also kept to
:data:`CANDIDATES_PER_TRACE` candidates a trace on average: ``cap`` traces of a small fleet, fewer of
a big one (4,096 traces of 200 candidates held 1.7 GB while a store was down; now about 160).
"""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import ValidationError

from schemas.trace import DecisionTrace

__all__ = ["CANDIDATES_PER_TRACE", "PendingTraces"]

CANDIDATES_PER_TRACE = 8  # the candidates kept are at most cap times this


class PendingTraces:
    """The newest ``cap`` traces spooled and not yet stored, by request id and in spool order.

    Validated traces, or the plain values of ``emit_plain()`` (validated when asked for). The
    emitter changes it under ``Backlog.lock`` only.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap  # 0: none kept
        self._traces: dict[str, DecisionTrace | dict[str, Any]] = {}
        self._seq: dict[int, tuple[str, int]] = {}  # spool sequence -> (request id, candidates), in sequence order
        self._candidates = 0  # of the traces kept

    def add(self, seq: int, request_id: str, trace: DecisionTrace | dict[str, Any]) -> None:
        """Keep the trace spooled as ``seq``; forget the oldest past ``cap`` traces or their candidates' share."""
        n = len(trace.candidates) if isinstance(trace, DecisionTrace) else len(trace.get("candidates") or ())
        self._traces[request_id] = trace
        self._seq[seq] = (request_id, n)
        self._candidates += n
        most = self.cap * CANDIDATES_PER_TRACE
        while self._seq and (len(self._seq) > self.cap or self._candidates > most):  # the store is behind
            self._forget(next(iter(self._seq)))

    def stored(self, newest: int) -> None:
        """Forget every trace up to spool sequence ``newest``: stored by now, or dropped or found damaged."""
        for seq in list(itertools.takewhile(lambda seq: seq <= newest, self._seq)):
            self._forget(seq)

    def _forget(self, seq: int) -> None:
        request_id, n = self._seq.pop(seq)
        self._candidates -= n
        self._traces.pop(request_id, None)

    def get(self, request_id: str) -> DecisionTrace | None:
        """The trace of ``request_id`` (None too for plain values that do not validate)."""
        found = self._traces.get(request_id)
        if found is None or isinstance(found, DecisionTrace):
            return found
        try:
            return DecisionTrace.model_validate(found)
        except ValidationError:
            return None  # the store quarantines it
