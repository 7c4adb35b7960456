"""The gateway's and the router's Prometheus metrics, defined once against an injected registry."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import SummaryMetricFamily
from prometheus_client.registry import Collector

from router_core.metrics.buffered_histogram import BufferedHistogram
from router_core.metrics.fleet import FleetGauges
from router_core.metrics.routing_time import split_request_time
from router_core.metrics.throttles import ThrottleMetrics
from schemas.trace import Attempt

__all__ = ["GatewayMetrics", "ModesMetrics", "PluginMetrics", "StageTimes"]


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
        # One observation per request: appended to a list, counted when scraped (see BufferedHistogram).
        self._decision = BufferedHistogram(
            "routelens_router_decision_duration_seconds", "Time spent in Router.decide.", [],
            buckets=(5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2), registry=registry,
        ).observer()
        self.fallbacks = Counter("routelens_router_fallbacks", "Decisions that fell back.", registry=registry)
        # Seed 003 §1: the router's own time against the upstream's, per request an instance answered
        # (router_core.metrics.routing_time); RouteLensRoutingOverBudget fires past 15%.
        self._routing = BufferedHistogram(
            "routelens_gateway_routing_duration_seconds", "The gateway's own time per request an instance "
            "answered: before the first attempt was sent and after the answer.", [],
            buckets=(2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0), registry=registry,
        ).observer()
        self._upstream = BufferedHistogram(
            "routelens_gateway_upstream_duration_seconds", "Upstream (inference) time per request an instance "
            "answered: from the first attempt sent to the answer, a stream to its end.", [],
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0), registry=registry,
        ).observer()
        # Seed 002 §3.2: nothing feasible is the severe case (deploy/prometheus/routelens-gateway.rules.yml).
        self.no_feasible = Counter(
            "routelens_router_no_feasible", "Requests whose candidates had no feasible instance, by what the router "
            "did then (fallback_model, fail_open, reject, degraded, context_length_exceeded).",
            ["model", "rule", "outcome"], registry=registry
        )
        self.feedback = Counter(
            "routelens_gateway_feedback", "Feedback received, by verdict.", ["correct"], registry=registry
        )
        self.breakers = Gauge("routelens_breaker_state", "Breaker state: 0 closed, 1 half-open, 2 open.",
                              ["scope", "name"], registry=registry)
        self.fleet = FleetGauges(registry)  # per-instance KV cache and latches, read from the state view per scrape
        self.throttles = ThrottleMetrics(registry)  # rules' throttles: counted by the policy gates (PolicyGate.admit)

    def record_breaker(self, scope: str, name: str, state: int) -> None:
        """Set one breaker's state (0 closed, 1 half-open, 2 open)."""
        self.breakers.labels(scope, name).set(state)

    def record_request(self, model: str | None, instance: str | None, code: int) -> None:
        """Count one finished request."""
        self.requests.labels(model or "", instance or "", str(code)).inc()

    def record_attempt(self, instance: str, status: str) -> None:
        """Count one forwarding attempt."""
        self.attempts.labels(instance, status).inc()

    def record_feedback(self, correct: bool) -> None:
        """Count one feedback record."""
        self.feedback.labels("true" if correct else "false").inc()

    def record_no_feasible(self, model: str, rule: str, outcome: str | None) -> None:
        """Count one request that found nothing feasible (``outcome`` None: it did find something; not counted)."""
        if outcome is not None:
            self.no_feasible.labels(model, rule, outcome).inc()

    def record_routing_time(self, attempts: Sequence[Attempt], elapsed_ms: float, total_ms: float,
                            ttft_ms: float | None) -> None:
        """Observe a request's own and upstream time, for a request an instance answered.

        See :func:`router_core.metrics.routing_time.split_request_time`.
        """
        split = split_request_time(attempts, elapsed_ms, total_ms, ttft_ms)
        if split is not None:
            self._routing(split[0])
            self._upstream(split[1])

    def record_decision(self, seconds: float, fallback: bool) -> None:
        """Observe one decision."""
        self._decision(seconds)
        if fallback:
            self.fallbacks.inc()


class PluginMetrics:
    """``routelens_router_plugin_duration_seconds{extension_point, plugin_type, plugin_name}``.

    The router (the runner) observes every plugin call it times; plugins never time themselves.

    Args:
        registry: Where the histogram is registered (never the global default in tests).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        # buffered (router_core.metrics.buffered_histogram): 8-10 observations a decision, on the request path
        self.duration = BufferedHistogram(
            "routelens_router_plugin_duration_seconds",
            "Time the router spent in one plugin per decision.",
            ["extension_point", "plugin_type", "plugin_name"],
            buckets=(1e-6, 5e-6, 2e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 5e-3),
            registry=registry,
        )

    def observer(self, extension_point: str, plugin_type: str, plugin_name: str) -> Callable[[float], None]:
        """Return the ``observe(seconds)`` of one plugin's series (bound once, called per decision)."""
        return self.duration.observer(extension_point, plugin_type, plugin_name)


class ModesMetrics:
    """The router's mode (static, safe) and the cost budgets' spend per band.

    Args:
        registry: Where the collectors are registered (never the global default in tests).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.mode = Gauge("routelens_router_mode", "1 for the router's current mode.", ["mode"], registry=registry)
        self.switches = Counter("routelens_router_mode_switches", "Router mode switches, by mode entered.",
                                ["mode"], registry=registry)
        self.spend = Gauge("routelens_budget_spend", "Spend on a band's models in its current window.", ["band"],
                           registry=registry)
        self.calls = Gauge("routelens_budget_calls", "Calls in a band's current window (all, governed).",
                           ["band", "scope"], registry=registry)
        self.use = Gauge("routelens_budget_use_ratio", "A band's spend / budget in its current window.", ["band"],
                         registry=registry)
        self.misroutes = Gauge("routelens_router_misroute_ratio", "The misroute share of feedback in the safe mode's "
                               "window (NaN: too little feedback).", registry=registry)

    def record_mode(self, mode: str, modes: tuple[str, ...], switched: bool) -> None:
        """Set the current mode (one of ``modes``); count a switch into it."""
        for m in modes:
            self.mode.labels(m).set(1.0 if m == mode else 0.0)
        if switched:
            self.switches.labels(mode).inc()

    def record_misroutes(self, rate: float | None) -> None:
        """Set the misroute share (None: too little feedback to tell)."""
        self.misroutes.set(math.nan if rate is None else rate)

    def record_budgets(self, rows: list[dict[str, object]]) -> None:
        """Set each band's spend, calls and use (rows of ``BudgetTracker.state``)."""
        for row in rows:
            band = str(row["band"])
            self.spend.labels(band).set(float(row["spend"]))  # type: ignore[arg-type]
            self.calls.labels(band, "all").set(float(row["calls"]))  # type: ignore[arg-type]
            self.calls.labels(band, "governed").set(float(row["governed_calls"]))  # type: ignore[arg-type]
            self.use.labels(band).set(float(row["use"]))  # type: ignore[arg-type]


class StageTimes(Collector):
    """CPU time of the event loop's thread in each stage of the chat route, exported as a summary.

    ``routelens_gateway_stage_cpu_seconds{stage}`` (``_sum``, ``_count``): the stage's cost budget.
    :attr:`clock` is the calling thread's CPU time, so waiting (for the body, for an instance)
    costs nothing. One request at a time, a stage's figure is its own work; with requests
    interleaved, the work of others that runs while one awaits is counted to the stage it awaits
    in (``forward``, ``respond``). The runner calls :meth:`add` once per stage per request: one
    dict lookup and two additions, no lock (the event loop is the only writer).

    Args:
        registry: Where it is registered (None: not exported).
    """

    clock = staticmethod(time.thread_time)

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._cells: dict[str, list[float]] = {}  # stage -> [CPU seconds, count]
        if registry is not None:
            registry.register(self)

    @property
    def seconds(self) -> dict[str, float]:
        """CPU seconds summed per stage."""
        return {stage: cell[0] for stage, cell in list(self._cells.items())}

    @property
    def count(self) -> dict[str, int]:
        """Requests timed, per stage."""
        return {stage: int(cell[1]) for stage, cell in list(self._cells.items())}

    def add(self, stage: str, start: float, end: float) -> float:
        """Count ``end - start`` seconds for ``stage``; return ``end`` (the next stage's start)."""
        cell = self._cells.get(stage)
        if cell is None:
            cell = self._cells[stage] = [0.0, 0]
        cell[0] += end - start
        cell[1] += 1
        return end

    def collect(self) -> Iterator[SummaryMetricFamily]:
        """The summary, one series per stage seen."""
        family = SummaryMetricFamily("routelens_gateway_stage_cpu_seconds",
                                     "CPU time of the event loop in each stage of the chat route.", labels=["stage"])
        for stage, (total, n) in list(self._cells.items()):
            family.add_metric([stage], int(n), total)
        yield family
