"""Stale state is not trusted: an instance whose metrics stopped arriving is infeasible."""

from __future__ import annotations

from typing import ClassVar

from router_core.framework import Candidate, DecisionContext
from schemas.trace import Violation

__all__ = ["FreshnessFilter"]


class FreshnessFilter:
    """Rejects instances never scraped, or whose last good scrape is older than ``max_age_s``.

    What it does: pessimistic staleness; a dead exporter must not look like an idle instance.
    Inputs consumed: the age of ``InstanceSnapshot.scraped_at`` at ``ctx.now``, and ``scrape_error``.
    Parameters: ``max_age_s`` (``scrape.stale_after_s``).
    Category: filter.
    """

    TYPE: ClassVar[str] = "freshness-filter"
    # Time-dependent only once the state is older than scrape.suspect_after_s (<= max_age_s), and the
    # router never memoises such state: within the memo's validity this filter always passes.
    STATE_ONLY: ClassVar[bool] = True

    def __init__(self, max_age_s: float, name: str = "freshness") -> None:
        self.name = name
        self.max_age_s = max_age_s

    def check(self, candidate: Candidate, ctx: DecisionContext) -> Violation | None:
        """Return a violation when the instance's state is too old or missing."""
        age = candidate.eff.age_s  # computed once per candidate by the router
        if age is not None and age <= self.max_age_s:
            return None
        state = candidate.state
        why = "never scraped" if age is None else f"metrics {age:.1f}s old"
        if state.scrape_error:
            why += f" ({state.scrape_error})"
        return Violation(constraint=self.name, metric="state_age_s", op="<=", value=age,
                         threshold=self.max_age_s, reason=why)
