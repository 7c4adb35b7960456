"""A matched rule as the router runs it: the levels to try, the guarantee, the cost scale; peak-hour prices.

The gateway matches the request against the rule set and applies the rule's throttle (both need
the request and a clock); the router gets the outcome as a :class:`RouteChoice` in the decision
context and stays a pure function of its inputs. :class:`PeakHours` is ``routing.peak_hours`` as
both peak premiums read it: a rule's ``cost_params`` surge (through its rule set) and an instance's
``cost.surge_multiplier`` (its per-request price).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from router_core.framework.types import Candidate
from router_core.rules.ir import DegradedTarget, Match, Origin, Rule, RuleSet
from schemas.config.routing import RoutingSettings
from schemas.fleet import CostSpec
from schemas.trace import Attempt, RequestFeatures, Violation

__all__ = ["KEYWORDS_RULE", "NO_RULES", "PeakHours", "RouteChoice", "expected_tokens", "guarantee_violation",
           "keyword_rule", "priced"]

KEYWORDS_RULE = "keywords"  # the rule the keyword score routes by (routing.keywords)
NO_RULES = RuleSet(rules=(), source="routing")  # what a request is matched against without a policy file
_KEYWORDS_ORIGIN = Origin("routing.keywords", 1)


def keyword_rule(target: str | None) -> Rule:
    """The rule a keyword score past its threshold routes by: to ``target``, without chain or throttle."""
    return Rule(name=KEYWORDS_RULE, origin=_KEYWORDS_ORIGIN, primary=target)


@dataclass(frozen=True, slots=True)
class RouteChoice:
    """The rule that matched a request and what its throttle did.

    Attributes:
        rules: The rule set matched against.
        match: The rule (None: none matched) and the rules tried.
        local_hour: The request's hour in the rule set's time zone (what its conditions read; traced).
        skip_primary: The throttle sent this request down the chain.
        throttled: What the throttle did (``chain``, ``wait``, ``reject``; None: it had a token).
        waited_s: Seconds the request queued for a token, whether one came (``wait``) or ``max_wait``
            ran out (``reject``); None: it did not queue (and in a replay, which never waits).
    """

    rules: RuleSet
    match: Match
    local_hour: int
    skip_primary: bool = False
    throttled: str | None = None
    waited_s: float | None = None

    @property
    def rule(self) -> Rule | None:
        """The matched rule."""
        return self.match.rule

    def levels(self) -> list[str | None]:
        """Models to try in order: the primary (None: every model), then the chain's models."""
        rule = self.match.rule
        if rule is None:
            return []
        first: list[str | None] = [] if self.skip_primary else [rule.primary]
        return first + [t for t in self.rules.chain_of(rule) if t not in self.rules.degraded]

    def degraded(self) -> DegradedTarget | None:
        """The chain's first non-LLM target (None: the chain has none)."""
        rule = self.match.rule
        if rule is None:
            return None
        return next((self.rules.degraded[t] for t in self.rules.chain_of(rule) if t in self.rules.degraded), None)

    def step(self, attempts: Sequence[Attempt], degraded_used: str | None,
             extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The trace's ``policy`` step (``schemas.trace_policy.PolicyStep`` field names).

        ``chain_used`` is the models attempted in order, then the degraded target if it answered.
        """
        rule = self.match.rule
        used = list(dict.fromkeys(a.model for a in attempts))
        if degraded_used is not None:
            used.append(degraded_used)
        return {
            "policy": f"{self.rules.source} {self.rules.hash}",
            "rule": None if rule is None else rule.name,
            "tried": [{"rule": t.rule, "matched": t.matched, "detail": t.detail} for t in self.match.tried],
            "target": None if rule is None else rule.primary,
            "chain": [] if rule is None else list(self.rules.chain_of(rule)),
            "chain_used": used,
            "throttled": self.throttled,
            "waited_s": self.waited_s,
            **(extra or {}),
        }

    def cost_factor(self, peak: bool) -> float:
        """How much the cost term weighs for this request: ``base_weight``, times the surge in peak hours.

        Args:
            peak: Whether the request's time is a peak hour: ``routing.peak_hours`` in ``routing.timezone``
                (:meth:`PeakHours.at`), as the instances' prices read it, not in the rule set's own zone
                (which its conditions read).
        """
        rule = self.match.rule
        if rule is None or rule.cost is None:
            return 1.0
        return rule.cost.base_weight * (rule.cost.surge_multiplier if peak else 1.0)


def priced(cost: CostSpec, peak: bool, prompt_tokens: int = 0, completion_tokens: int = 0) -> float:
    """An instance's price of one request: ``base`` plus its tokens at their prices, in a peak hour times the surge.

    Token prices 0: ``base`` alone, whatever the tokens.
    """
    price = cost.base
    if cost.per_token:
        price += (prompt_tokens * cost.input_per_1m + completion_tokens * cost.output_per_1m) / 1e6
    return price * cost.surge_multiplier if peak else price


def expected_tokens(cost: CostSpec, features: RequestFeatures) -> tuple[int, int]:
    """The prompt and completion tokens a request is priced at before its answer.

    The estimated input, and ``cost.expected_output_tokens`` at most the request's ``max_tokens``.
    """
    out = cost.expected_output_tokens
    if features.max_tokens is not None and features.max_tokens < out:
        out = features.max_tokens
    return features.est_input_tokens, out


class PeakHours:
    """``routing.peak_hours`` in ``routing.timezone``: whether a request's time is a peak hour, and prices then.

    The test of an hour is the rules' own (:meth:`RuleSet.in_peak`, which a rule's ``cost_params``
    surge reads); the hour is the request's (the context's ``now``: the injected clock live, the
    trace's ``ts`` in a replay) read in the zone. The last time asked and its answer are kept, so the
    cost scorer, the trace's cost and the budgets' spend of one request share one zone conversion.
    """

    __slots__ = ("_bands", "_last", "_zone")

    def __init__(self, peak_hours: Sequence[tuple[int, int]] = (), timezone: str = "UTC") -> None:
        self._bands = RuleSet(rules=(), source="routing", timezone=timezone, peak_hours=tuple(peak_hours))
        self._zone = ZoneInfo(timezone)
        self._last: tuple[datetime, bool] | None = None

    @classmethod
    def of(cls, routing: RoutingSettings) -> PeakHours:
        """The peak hours ``routing`` declares, in its time zone."""
        return cls(routing.peak_hours, routing.timezone)

    def at(self, now: datetime) -> bool:
        """Whether ``now`` (UTC; a naive time is taken as UTC) falls in a peak band, in local hours."""
        last = self._last
        if last is not None and last[0] == now:
            return last[1]
        local = (now if now.tzinfo is not None else now.replace(tzinfo=UTC)).astimezone(self._zone)
        peak = self._bands.in_peak(local.hour)
        self._last = (now, peak)
        return peak

    def price(self, cost: CostSpec, now: datetime, prompt_tokens: int = 0, completion_tokens: int = 0) -> float:
        """The price of a request at ``now`` of these tokens on an instance costing ``cost``."""
        return priced(cost, self.at(now), prompt_tokens, completion_tokens)


def guarantee_violation(rule: Rule, cand: Candidate, max_concurrency: int) -> Violation | None:
    """The rule's resource guarantee, judged on one candidate (None: it holds or there is none).

    Free KV-cache bytes are ``(1 - usage) * kv_cache_bytes`` with the staleness-adjusted usage; free
    slots are ``max_concurrency - running - queue``.
    """
    g = rule.guarantee
    if g is None:
        return None
    eff, spec = cand.eff, cand.spec
    if g.min_free_kv_bytes is not None and spec.kv_cache_bytes is not None:
        free = (1.0 - eff.kv_cache_usage) * spec.kv_cache_bytes
        if free < g.min_free_kv_bytes:
            return Violation(constraint=f"rule/{rule.name}", metric="free_kv_bytes", op=">=", value=free,
                             threshold=g.min_free_kv_bytes,
                             reason=f"{free / 2**30:.1f} GiB KV cache free < {g.min_free_kv_bytes / 2**30:.1f} GiB "
                                    f"guaranteed by rule {rule.name}")
    if g.min_free_slots is not None:
        free_slots = max_concurrency - eff.running - eff.queue
        if free_slots < g.min_free_slots:
            return Violation(constraint=f"rule/{rule.name}", metric="free_slots", op=">=", value=free_slots,
                             threshold=g.min_free_slots,
                             reason=f"{free_slots:g} free sequence slots < {g.min_free_slots} reserved by rule "
                                    f"{rule.name}")
    return None
