"""What the decision's plugin runners share (:mod:`router_core.decide.filtering`, :mod:`router_core.decide.scoring`)."""

from __future__ import annotations

from collections.abc import Callable

from router_core.decide.policy import Policy
from router_core.decide.prepared import PreparedCache

__all__ = ["Observer", "Runner"]

Observer = Callable[[str, object], Callable[[float], None] | None]  # (extension point, plugin) -> observe or None


class Runner:
    """What a plugin runner holds: the policy, the per-snapshot memo and the clock that times each call.

    It runs nothing itself: :class:`~router_core.decide.filtering.Filters` and
    :class:`~router_core.decide.scoring.Scores` run the filters and scorers and time each call.

    Args:
        policy: The plugins, in order.
        prepared: The per-snapshot memo of state-only verdicts and terms.
        perf: Monotonic clock for step durations.
    """

    def __init__(self, policy: Policy, prepared: PreparedCache, perf: Callable[[], float]) -> None:
        self.policy = policy
        self._prepared = prepared
        self._perf = perf
