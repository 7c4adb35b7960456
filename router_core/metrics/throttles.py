"""A routing rule's throttle in Prometheus: what it did with each request, and how long they queued.

``routelens_rule_throttle_requests_total{rule,action}`` counts each request a throttled rule
matched, by what its throttle did: admitted it at once (``admitted``), sent it down the chain
(``chain``), refused it with 429 (``reject``), or held it until a token came (``wait``); so a
rule's share refused is its ``reject`` over its total. A request whose ``max_wait`` ran out is a
``reject`` (it was refused), and its wait is observed all the same.

``routelens_rule_throttle_wait_seconds{rule}`` is the time a request queued for a token
(``overflow: wait``), whether one came or not. A request refused at once because the next token
was further off than ``max_wait`` did not queue and is not observed.

``rule`` is a rule's name in the policy file, never anything a request says, so the label set is
bounded by the policy files the gateway has loaded. A rule without a throttle adds nothing to the
request path: :meth:`~router_core.gateway.policy_gate.PolicyGate.admit` returns before any of this.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from router_core.metrics.buffered_histogram import BufferedHistogram

__all__ = ["WAIT_BUCKETS", "ThrottleMetrics"]

# max_wait is 0-60 s (schemas.policy_file); waits are measured to the millisecond.
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ThrottleMetrics:
    """``routelens_rule_throttle_requests_total{rule,action}`` and ``routelens_rule_throttle_wait_seconds{rule}``.

    Args:
        registry: Where the collectors are registered (never the global default in tests).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.throttled = Counter(
            "routelens_rule_throttle_requests", "Requests a throttled rule matched, by what its throttle did: "
            "admitted (at once), chain (sent down the chain), reject (refused with 429, max_wait run out "
            "included), wait (admitted once a token came).", ["rule", "action"], registry=registry,
        )
        self._wait = BufferedHistogram(
            "routelens_rule_throttle_wait_seconds", "Time a request queued for its rule's token (overflow: wait), "
            "whether one came or max_wait ran out.", ["rule"], buckets=WAIT_BUCKETS, registry=registry,
        )
        self._observers: dict[str, Callable[[float], None]] = {}

    def declare(self, rule: str, overflow: str) -> None:
        """Show a throttled rule's series at 0 before its first overflow (``rate`` sees the first one).

        ``reject`` is shown for every rule, one that chains too (it never refuses): the share of a rule's
        requests refused is then 0 for it, not an empty result.
        """
        for action in dict.fromkeys(("admitted", overflow, "reject")):
            self.throttled.labels(rule, action)
        if overflow == "wait":
            self._observer(rule)

    def record_throttle(self, rule: str, action: str | None, waited_s: float | None) -> None:
        """Count what a rule's throttle did with one request (``action`` None: admitted at once).

        Args:
            rule: The rule's name in the policy file.
            action: ``chain``, ``reject`` or ``wait`` (:class:`router_core.rules.throttle.Admission`'s).
            waited_s: Seconds the request queued for a token (None: it did not queue).
        """
        self.throttled.labels(rule, action or "admitted").inc()
        if waited_s is not None:
            self._observer(rule)(waited_s)

    def _observer(self, rule: str) -> Callable[[float], None]:
        observe = self._observers.get(rule)
        if observe is None:
            observe = self._observers[rule] = self._wait.observer(rule)
        return observe
