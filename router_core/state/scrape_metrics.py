"""The scraper's Prometheus metrics, defined once against an injected registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["SCRAPE_FAILURE_REASONS", "ScrapeMetrics"]

# The bounded label vocabulary of routelens_scrape_failures_total{reason}: never free text.
SCRAPE_FAILURE_REASONS = (
    "http_status", "timeout", "connect", "decode", "parse", "no_gauges", "out_of_range", "internal",
)


class ScrapeMetrics:
    """Collectors of :class:`router_core.state.scraper.MetricsScraper`; use the ``record_*`` helpers.

    - ``routelens_scrape_failures_total{instance, reason}``: scrapes that failed, or delivered
      refused (out-of-range) gauges, by reason (one of :data:`SCRAPE_FAILURE_REASONS`).
    - ``routelens_scrape_rounds_total``: scrape rounds completed.
    - ``routelens_scrape_last_round_timestamp_seconds``: Unix time the last round completed.
    - ``routelens_scrape_round_duration_seconds``: how long each round took (longer than
      ``scrape.interval_s``: the rounds overrun; see docs/deployment.md, A big fleet).

    Args:
        registry: Where the collectors are registered (never the global default in tests).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.failures = Counter(
            "routelens_scrape_failures", "Instance scrapes that failed, by reason.", ["instance", "reason"],
            registry=registry,
        )
        self.rounds = Counter("routelens_scrape_rounds", "Scrape rounds completed.", registry=registry)
        self.last_round = Gauge(
            "routelens_scrape_last_round_timestamp_seconds", "When the last scrape round completed.",
            registry=registry,
        )
        self.round_duration = Histogram(
            "routelens_scrape_round_duration_seconds", "How long a scrape round of every instance took.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0), registry=registry,
        )

    def record_failure(self, instance: str, reason: str) -> None:
        """Count one failed scrape of ``instance`` (an unknown reason is counted as ``internal``)."""
        self.failures.labels(instance, reason if reason in SCRAPE_FAILURE_REASONS else "internal").inc()

    def record_round(self, unix_s: float, duration_s: float | None = None) -> None:
        """Count one completed round, finished at ``unix_s`` after ``duration_s`` seconds."""
        self.rounds.inc()
        self.last_round.set(unix_s)
        if duration_s is not None:
            self.round_duration.observe(duration_s)
