"""W3C trace context: the client's ``traceparent``/``tracestate`` in, one on every upstream attempt out.

A request whose ``traceparent`` is valid joins the client's trace: its trace id is kept, the
client's span becomes the parent of the gateway's request span, and ``tracestate`` and the
trace flags are passed on unchanged. A missing or invalid one (wrong length, upper-case hex, an
all-zero id, version ``ff``) starts a new trace; it is never a reason to refuse the request
(the W3C recommendation). Every upstream attempt gets a span id of its own and is sent
``traceparent: 00-<trace id>-<attempt span id>-<flags>``, so the instance's spans hang under
the attempt that called it. Ids come from an injected source of random bytes (tests seed it).

A trace the gateway begins is flagged sampled (``01``) when the span exporter's ratio keeps it
(OpenTelemetry's ``TraceIdRatioBased`` on its id: :func:`schemas.sampling.ratio_keeps`, the rule
the exporter applies) and ``00`` otherwise, so an instance sampling ``ParentBased`` records its
spans for exactly the traces whose parents reach the tracing backend. Without export every trace
begun here is flagged sampled.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from schemas.sampling import ratio_keeps

__all__ = ["TraceContext", "TraceIds", "parse_traceparent"]

_HEX = re.compile(r"^[0-9a-f]+$")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_MAX_TRACESTATE = 512  # W3C: a vendor may drop a longer one rather than pass it on
SAMPLED, NOT_SAMPLED = "01", "00"


def _is_hex(value: str, size: int, zero: str) -> bool:
    return len(value) == size and value != zero and _HEX.match(value) is not None


def parse_traceparent(value: str | None) -> tuple[str, str, str] | None:
    """``(trace id, parent span id, flags)`` of a valid ``traceparent`` header, else None.

    Version ``00`` is exactly 55 characters; a later version may carry more after a ``-``
    (its first four fields are read as version 00's, per the W3C's forward-compatibility rule).
    """
    if value is None:
        return None
    value = value.strip()
    if len(value) < 55 or (len(value) > 55 and value[55] != "-"):
        return None
    version, trace_id, parent_id, flags = value[:2], value[3:35], value[36:52], value[53:55]
    if value[2] != "-" or value[35] != "-" or value[52] != "-":
        return None
    if not _is_hex(version, 2, "") or version == "ff" or (version == "00" and len(value) != 55):
        return None
    if not _is_hex(trace_id, 32, _ZERO_TRACE) or not _is_hex(parent_id, 16, _ZERO_SPAN) or not _is_hex(flags, 2, ""):
        return None
    return trace_id, parent_id, flags


@dataclass(frozen=True, slots=True)
class TraceContext:
    """One request's place in a distributed trace.

    Attributes:
        trace_id: 32 hex: the client's, or a new one.
        span_id: The gateway's request span (16 hex).
        parent_id: The client's span (None: the gateway began the trace).
        flags: Trace flags passed on (the client's; for a trace begun here, the sample ratio's verdict).
        tracestate: The client's ``tracestate``, passed on as it came (None: none or invalid).
        new_span_id: Gives the span id of each upstream attempt.
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    flags: str
    tracestate: str | None
    new_span_id: Callable[[], str]

    def traceparent(self, span_id: str) -> str:
        """The ``traceparent`` header for a call made from span ``span_id``."""
        return f"00-{self.trace_id}-{span_id}-{self.flags}"


class TraceIds:
    """Makes trace and span ids, and each request's :class:`TraceContext`.

    Args:
        random_bytes: ``n -> n`` random bytes (``os.urandom``; tests pass a seeded ``random.Random().randbytes``).
        sample_ratio: The span exporter's ``otel.sample_ratio`` (1.0 when spans are not exported): a trace
            begun here is flagged sampled when the ratio keeps it.
    """

    def __init__(self, random_bytes: Callable[[int], bytes] = os.urandom, sample_ratio: float = 1.0) -> None:
        self._random = random_bytes
        self._ratio = sample_ratio

    def span_id(self) -> str:
        """A new span id: 16 hex, never all zeros."""
        while (value := self._random(8).hex()) == _ZERO_SPAN:
            pass
        return value

    def trace_id(self) -> str:
        """A new trace id: 32 hex, never all zeros."""
        while (value := self._random(16).hex()) == _ZERO_TRACE:
            pass
        return value

    def context(self, headers: Mapping[str, str]) -> TraceContext:
        """The request's context: the client's trace when its ``traceparent`` is valid, else a new one."""
        parsed = parse_traceparent(headers.get("traceparent"))
        if parsed is None:
            trace_id = self.trace_id()
            flags = SAMPLED if ratio_keeps(trace_id, self._ratio) else NOT_SAMPLED
            return TraceContext(trace_id, self.span_id(), None, flags, None, self.span_id)
        trace_id, parent_id, flags = parsed
        state = headers.get("tracestate")
        if state is not None and (len(state) > _MAX_TRACESTATE or not state.strip()):
            state = None
        return TraceContext(trace_id, self.span_id(), parent_id, flags, state, self.span_id)
