"""Traces emitted but not stored yet, for read-your-writes.

A client that asks for its trace right after the response finds it here until the store has it
(:meth:`TraceEmitter.pending <ingest.pipeline.emitter.TraceEmitter.pending>`). While the store is
behind, only the newest ``cap`` are kept: each holds its decision in memory.
"""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import ValidationError

from schemas.trace import DecisionTrace

__all__ = ["PendingTraces"]


class PendingTraces:
    """The newest ``cap`` traces spooled and not yet stored, by request id and in spool order.

    Validated traces, or the plain values of ``emit_plain()`` (validated when asked for). The
    emitter changes it under ``Backlog.lock`` only.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap  # 0: none kept
        self._traces: dict[str, DecisionTrace | dict[str, Any]] = {}
        self._seq: dict[int, str] = {}  # spool sequence -> request id, in sequence order

    def add(self, seq: int, request_id: str, trace: DecisionTrace | dict[str, Any]) -> None:
        """Keep the trace spooled as ``seq``; forget the oldest when there are more than ``cap``."""
        self._traces[request_id] = trace
        self._seq[seq] = request_id
        if len(self._seq) > self.cap:  # the store is behind: forget the oldest
            self._traces.pop(self._seq.pop(next(iter(self._seq))), None)

    def stored(self, newest: int) -> None:
        """Forget every trace up to spool sequence ``newest``: stored by now, or dropped or found damaged."""
        done = list(itertools.takewhile(lambda seq: seq <= newest, self._seq))
        for seq in done:
            self._traces.pop(self._seq.pop(seq), None)

    def get(self, request_id: str) -> DecisionTrace | None:
        """The trace of ``request_id`` (None too for plain values that do not validate)."""
        found = self._traces.get(request_id)
        if found is None or isinstance(found, DecisionTrace):
            return found
        try:
            return DecisionTrace.model_validate(found)
        except ValidationError:
            return None  # the store quarantines it
