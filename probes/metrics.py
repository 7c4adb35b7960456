"""The prober's Prometheus series, defined once on an injected registry (never the global one).

``routelens_probe_verdict`` is the hysteresis verdict (1 for the current one, 0 for the others),
what ``deploy/prometheus/routelens-probes.rules.yml`` alerts on; ``routelens_probe_success`` is
the last raw result. ``routelens_probe_last_result_timestamp_seconds`` is the Unix time of the
latest result, so ``time() - ...`` is the prober's silence. ``routelens_probe_concurrency_needed``
above ``routelens_probe_concurrency_limit`` means the prober cannot keep up with its fleet.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from schemas.common import ProbeKind, ProbeVerdict
from schemas.probe import ProbeResult, ProbeStatus

__all__ = ["ProbeMetrics"]

_DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_SLIP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ProbeMetrics:
    """Every probe collector, and the ``record_*``-style helpers that write them.

    Args:
        registry: Where the collectors live (the gateway's, or a test's fresh one).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.success = Gauge("routelens_probe_success", "1 if the last probe result was ok, else 0.",
                             ["instance", "model", "kind"], registry=registry)
        self.duration = Histogram("routelens_probe_duration_seconds", "Wall time of one probe.",
                                  ["kind"], buckets=_DURATION_BUCKETS, registry=registry)
        self.similarity = Gauge("routelens_probe_similarity",
                                "Lowest cosine similarity of the last semantic probe round.",
                                ["instance", "model"], registry=registry)
        self.verdict = Gauge("routelens_probe_verdict",
                             "1 for the current hysteresis verdict of a probe kind on an instance, 0 for the others.",
                             ["instance", "model", "kind", "verdict"], registry=registry)
        self.slip = Histogram("routelens_probe_schedule_slip_seconds",
                              "How late a probe started against its slot.", buckets=_SLIP_BUCKETS, registry=registry)
        self.last_result = Gauge("routelens_probe_last_result_timestamp_seconds",
                                 "Unix time of the latest probe result (the watchdog's input).", registry=registry)
        self.skipped = Counter("routelens_probe_skipped_total",
                               "Probe slots skipped because the previous probe was still running.",
                               ["kind"], registry=registry)
        for kind in ProbeKind:
            self.skipped.labels(kind.value)
        self.needed = Gauge("routelens_probe_concurrency_needed",
                            "Probes a period needs in flight on average (its probes' recent times over the interval).",
                            registry=registry)
        self.limit = Gauge("routelens_probe_concurrency_limit", "Probes allowed in flight at once.", registry=registry)

    def record(self, result: ProbeResult) -> None:
        """Write one result: success, duration, similarity (semantic) and the last-result time."""
        kind = result.kind.value
        self.success.labels(result.instance, result.model, kind).set(
            1.0 if result.verdict is ProbeVerdict.OK else 0.0)
        if result.latency_ms is not None:
            self.duration.labels(kind).observe(result.latency_ms / 1000.0)
        if result.kind is ProbeKind.SEMANTIC and result.value is not None:
            self.similarity.labels(result.instance, result.model).set(result.value)
        self.last_result.set(result.ts.timestamp())

    def set_status(self, instance: str, model: str, status: ProbeStatus) -> None:
        """Mark the current hysteresis verdict of one kind on one instance (1), and the others (0)."""
        for verdict in ProbeVerdict:
            self.verdict.labels(instance, model, status.kind.value, verdict.value).set(
                1.0 if verdict is status.verdict else 0.0)

    def observe_slip(self, seconds: float) -> None:
        """Record how late a probe started against its slot (negative slips count as 0)."""
        self.slip.observe(max(seconds, 0.0))

    def record_skipped(self, kind: ProbeKind) -> None:
        """Count a slot skipped because the previous probe of that pair was still running."""
        self.skipped.labels(kind.value).inc()

    def set_capacity(self, needed: float, limit: int) -> None:
        """Publish what the period starting now needs in flight, and the limit (needed > limit: falling behind)."""
        self.needed.set(needed)
        self.limit.set(limit)

    def forget(self, instance: str, model: str) -> None:
        """Drop an instance's series when it leaves the fleet (no stale verdicts in Prometheus)."""
        for kind in ProbeKind:
            _remove(self.success, (instance, model, kind.value))
            for verdict in ProbeVerdict:
                _remove(self.verdict, (instance, model, kind.value, verdict.value))
        _remove(self.similarity, (instance, model))


def _remove(metric: Gauge, labels: tuple[str, ...]) -> None:
    try:
        metric.remove(*labels)
    except KeyError:
        pass
