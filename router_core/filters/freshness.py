"""Stale state is not trusted: an instance whose metrics stopped arriving is infeasible."""

from __future__ import annotations

from typing import ClassVar

from router_core.framework import Candidate
from schemas.trace import RequestFeatures, Violation

__all__ = ["FreshnessFilter"]


class FreshnessFilter:
    """Rejects instances whose last good scrape is older than ``max_age_s``.

    What it does: pessimistic staleness; a dead exporter must not look like an idle instance.
    Inputs consumed: ``InstanceSnapshot.age_s`` (None: never scraped) and ``scrape_error``.
    Parameters: ``max_age_s``.
    Category: filter.
    """

    TYPE: ClassVar[str] = "freshness-filter"

    def __init__(self, max_age_s: float, name: str = "freshness") -> None:
        self.name = name
        self.max_age_s = max_age_s

    def check(self, candidate: Candidate, features: RequestFeatures) -> Violation | None:
        """Return a violation when the instance's state is older than the bound."""
        state = candidate.state
        if state.age_s is not None and state.age_s <= self.max_age_s:
            return None
        why = "never scraped" if state.age_s is None else f"metrics {state.age_s:.1f}s old"
        if state.scrape_error:
            why += f" ({state.scrape_error})"
        return Violation(
            constraint=self.name,
            metric="state_age_s",
            op="<=",
            value=state.age_s,
            threshold=self.max_age_s,
            reason=why,
        )
