"""OpenTelemetry's ``TraceIdRatioBased`` rule: whether a sampling ratio keeps a trace, from its id alone.

The gateway decides with it the sampled flag of a trace it begins (the ``traceparent`` its
instances get), and the span exporter which of those traces it sends; both read the same bits, so
they agree, and so do other services sampling at the same ratio.
"""

from __future__ import annotations

__all__ = ["ratio_keeps"]

_MASK = (1 << 64) - 1


def ratio_keeps(trace_id: str, ratio: float) -> bool:
    """Whether ``ratio`` keeps the trace ``trace_id`` (32 hex): its lower 64 bits below ``ratio * 2**64``."""
    if ratio >= 1.0:
        return True
    return int(trace_id, 16) & _MASK < round(ratio * (1 << 64))
