"""What ``serve`` wires from the ``shared`` settings: the configured state, and its series for ``/metrics``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from router_core.shared.base import MemoryShared, SharedState
from router_core.shared.redis_shared import RedisShared
from schemas.config.shared import SharedSettings

__all__ = ["SharedCollector", "build_shared"]


class SharedCollector(Collector):
    """``routelens_shared_healthy``, ``_fallbacks_total``, ``_replicas``, ``_credit_total`` of a shared state."""

    def __init__(self, shared: SharedState) -> None:
        self._shared = shared

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Read the state's health and counts at scrape time."""
        backend = self._shared.backend
        healthy = GaugeMetricFamily("routelens_shared_healthy",
                                    "1 while the shared state store is reachable (0: routing on local state).",
                                    labels=["backend"])
        healthy.add_metric([backend], 1.0 if self._shared.healthy else 0.0)
        yield healthy
        fallbacks = CounterMetricFamily("routelens_shared_fallbacks",
                                        "Shared-state calls answered by local state (Redis failed or down).",
                                        labels=["backend"])
        fallbacks.add_metric([backend], float(self._shared.fallbacks))
        yield fallbacks
        if isinstance(self._shared, RedisShared):
            stats = self._shared.stats()
            replicas = GaugeMetricFamily("routelens_shared_replicas", "Gateway replicas alive on the shared store.",
                                         labels=["backend"])
            replicas.add_metric([backend], float(stats["replicas"]))
            yield replicas
            credit = CounterMetricFamily("routelens_shared_credit",
                                         "Bucket tokens admitted on credit (lease empty, refill not back yet).",
                                         labels=["backend"])
            credit.add_metric([backend], float(stats["credited"]))
            yield credit


def build_shared(settings: SharedSettings, *, clock: Callable[[], float] = time.monotonic,
                 replicas: int = 1) -> SharedState:
    """The configured :class:`SharedState`: a :class:`MemoryShared`, or a :class:`RedisShared` (call its ``start``).

    ``replicas``: the processes expected to share it (``serve --workers``), counted until Redis
    answers a heartbeat: with Redis down from the start, each takes ``rate / replicas`` of a bucket.
    """
    if settings.backend == "redis":
        return RedisShared(settings.url, key_prefix=settings.key_prefix, timeout_s=settings.timeout_ms / 1e3,
                           clock=clock, replicas=replicas)
    return MemoryShared(clock)
