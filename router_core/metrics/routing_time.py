"""A served request's time, split into the router's own and the upstream's (seed 003 §1).

Seed 003: routing's own time must stay far below inference; once it passes 15% of the mean LLM
inference time, P95 latency falls off a cliff. The gateway observes both halves of every request
an instance answered (``routelens_gateway_routing_duration_seconds`` and
``routelens_gateway_upstream_duration_seconds``), and ``RouteLensRoutingOverBudget``
(deploy/prometheus/routelens-gateway.rules.yml) compares their sums.

::

    upstream = last attempt's end - first attempt's start      (retries, backoff and hedges between)
               + (total - ttft)                               a stream: after its first byte, to its end
    routing  = elapsed - upstream                             before the first attempt, after the answer

``elapsed`` runs from the request's arrival to its trace being emitted (durable before the answer
leaves, so on the request path). The stream after its first byte counts as the upstream's: the
relay's work per chunk runs while the instance generates and cannot be told apart from it.
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.trace import Attempt

__all__ = ["split_request_time"]


def split_request_time(attempts: Sequence[Attempt], elapsed_ms: float, total_ms: float,
                       ttft_ms: float | None) -> tuple[float, float] | None:
    """Return ``(routing_s, upstream_s)`` of a request an instance answered (None: no attempt).

    Args:
        attempts: The request's forwarding attempts (``start_ms`` from one origin; None: not
            recorded, then their latencies are summed).
        elapsed_ms: Arrival to now (the trace emitted).
        total_ms: Arrival to the outcome being fixed (the answer built, or a stream relayed).
        ttft_ms: Arrival to a stream's first byte (None: not a stream).
    """
    if not attempts:
        return None
    if len(attempts) == 1:  # the common case: its span is its latency
        upstream = attempts[0].latency_ms
    elif len(starts := [a.start_ms for a in attempts if a.start_ms is not None]) == len(attempts):
        upstream = max(s + a.latency_ms for s, a in zip(starts, attempts, strict=True)) - min(starts)
    else:
        upstream = sum(a.latency_ms for a in attempts)
    if ttft_ms is not None:
        upstream += max(0.0, total_ms - ttft_ms)
    upstream = min(upstream, elapsed_ms)
    return (elapsed_ms - upstream) / 1e3, upstream / 1e3
