"""One chat request as it passes the stages (:class:`Call`): what was asked, and what is known so far.

:class:`~router_core.gateway.chat.ChatRunner` makes one per request and hands it from stage to stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from router_core.decide.recorder import TraceRecorder
from router_core.gateway.policy_gate import Understood
from router_core.gateway.trace_context import TraceContext

__all__ = ["Call"]


@dataclass(slots=True)
class Call:
    """One chat request as it passes the stages: what was asked, and what is known so far."""

    http: web.Request
    request_id: str
    t0: float
    body: Any = None
    rec: TraceRecorder | None = None
    answer_key: str | None = None  # its key in the recent-answers cache (memory only)
    shadow: Understood | None = None  # what a shadow with rules of its own made of it (None: not needed)
    trace: TraceContext | None = None  # W3C trace context: the client's trace, or one begun here
    origin: float | None = None  # the perf clock at the trace's ts (attempts' start_ms count from it)

    @property
    def otel(self) -> tuple[str, str, str | None, str, str | None] | None:
        """The trace's ids, flags and the client's tracestate as the recorder takes them (None: no context)."""
        t = self.trace
        return None if t is None else (t.trace_id, t.span_id, t.parent_id, t.flags, t.tracestate)
