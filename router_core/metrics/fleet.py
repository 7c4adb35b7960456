"""The fleet as the router sees it, as gauges: each instance's KV-cache usage and constraint latches.

Read from the state view's snapshots when ``/metrics`` is scraped (:meth:`FleetGauges.record`,
then the registry's collection), so they cost nothing on the request path and never outlive an
instance's state: a gauge the router does not trust (unknown, or the snapshot stale) is left
out rather than repeated.

- ``routelens_instance_kv_cache_usage_ratio{instance, model}``: KV-cache usage, 0-1, as last
  scraped (left out while unknown or stale).
- ``routelens_instance_constraint_out{instance, model, constraint}``: 1 while the constraint's
  hysteresis latch holds the instance out of the feasible set, else 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from schemas.fleet import InstanceSnapshot

__all__ = ["CONSTRAINT_OUT", "KV_CACHE_USAGE", "FleetGauges"]

KV_CACHE_USAGE = "routelens_instance_kv_cache_usage_ratio"
CONSTRAINT_OUT = "routelens_instance_constraint_out"


class FleetGauges(Collector):
    """Per-instance gauges of the snapshots last :meth:`record`-ed.

    Args:
        registry: Where it is registered (never the global default in tests).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._snapshots: tuple[InstanceSnapshot, ...] = ()
        registry.register(self)

    def record(self, snapshots: Iterable[InstanceSnapshot]) -> None:
        """Take the state view's snapshots (one per instance) for the next collection."""
        self._snapshots = tuple(snapshots)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The KV-cache gauge and the latch gauge, one series per instance (and constraint)."""
        kv = GaugeMetricFamily(KV_CACHE_USAGE, "KV-cache usage of an instance (0-1), as the router last scraped it.",
                               labels=["instance", "model"])
        out = GaugeMetricFamily(CONSTRAINT_OUT, "1 while a hard constraint's latch holds the instance out of the "
                                "feasible set.", labels=["instance", "model", "constraint"])
        for snap in self._snapshots:
            if snap.kv_cache_usage is not None and not snap.stale:
                kv.add_metric([snap.instance, snap.model], snap.kv_cache_usage)
            for latch in snap.latches:
                out.add_metric([snap.instance, snap.model, latch.constraint], 1.0 if latch.out else 0.0)
        yield kv
        yield out
