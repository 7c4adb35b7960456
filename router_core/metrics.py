"""The gateway's and the router's Prometheus metrics, defined once against an injected registry."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["GatewayMetrics", "PluginMetrics"]


class GatewayMetrics:
    """Collectors of the gateway; use the ``record_*`` helpers.

    Args:
        registry: Where the collectors are registered (never the global default in tests).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "routelens_gateway_requests", "Chat requests by outcome.", ["model", "instance", "code"], registry=registry
        )
        self.attempts = Counter(
            "routelens_gateway_attempts", "Forwarding attempts by result.", ["instance", "status"], registry=registry
        )
        self.decision = Histogram(
            "routelens_router_decision_duration_seconds",
            "Time spent in Router.decide.",
            buckets=(5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2),
            registry=registry,
        )
        self.fallbacks = Counter("routelens_router_fallbacks", "Decisions that fell back.", registry=registry)
        self.feedback = Counter(
            "routelens_gateway_feedback", "Feedback received, by verdict.", ["correct"], registry=registry
        )

    def record_request(self, model: str | None, instance: str | None, code: int) -> None:
        """Count one finished request."""
        self.requests.labels(model or "", instance or "", str(code)).inc()

    def record_attempt(self, instance: str, status: str) -> None:
        """Count one forwarding attempt."""
        self.attempts.labels(instance, status).inc()

    def record_feedback(self, correct: bool) -> None:
        """Count one feedback record."""
        self.feedback.labels("true" if correct else "false").inc()

    def record_decision(self, seconds: float, fallback: bool) -> None:
        """Observe one decision."""
        self.decision.observe(seconds)
        if fallback:
            self.fallbacks.inc()


class PluginMetrics:
    """``routelens_router_plugin_duration_seconds{extension_point, plugin_type, plugin_name}``.

    The router (the runner) observes every plugin call it times; plugins never time themselves.

    Args:
        registry: Where the histogram is registered (never the global default in tests).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.duration = Histogram(
            "routelens_router_plugin_duration_seconds",
            "Time the router spent in one plugin per decision.",
            ["extension_point", "plugin_type", "plugin_name"],
            buckets=(1e-6, 5e-6, 2e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 5e-3),
            registry=registry,
        )

    def observer(self, extension_point: str, plugin_type: str, plugin_name: str) -> Callable[[float], None]:
        """Return the ``observe(seconds)`` of one plugin's series (bound once, called per decision)."""
        return self.duration.labels(extension_point, plugin_type, plugin_name).observe
