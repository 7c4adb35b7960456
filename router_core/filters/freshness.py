"""Stale state is not trusted: an instance whose metrics stopped arriving is infeasible."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, ValidationInfo, field_validator

from router_core.framework import Candidate, Handle, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.trace import Violation

__all__ = ["FreshnessFilter"]


class FreshnessFilter(PluginBase):
    """Rejects instances never scraped, or whose last good scrape is older than ``max_age_s``.

    An ``engine: external`` instance (no ``/metrics``) is never scraped by design and passes: its
    state is the gateway's own count (:func:`router_core.state.staleness.effective_state`).

    What it does: pessimistic staleness; a dead exporter must not look like an idle instance.
    Inputs consumed: the age of ``InstanceSnapshot.scraped_at`` at ``ctx.now``, and ``scrape_error``.
    Parameters: ``max_age_s`` (from ``scrape.stale_after_s`` when derived from the sections).
    Category: filter.
    """

    TYPE: ClassVar[str] = "freshness-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "freshness"
    # Time-dependent only once the state is older than scrape.suspect_after_s (<= max_age_s), and the
    # router never memoises such state: within the memo's validity this filter always passes.
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """Parameters of :class:`FreshnessFilter`."""

        max_age_s: float = Field(5.0, gt=0, description="Older state takes the instance out.")

        @field_validator("max_age_s")
        @classmethod
        def _not_below_suspect(cls, value: float, info: ValidationInfo) -> float:
            # Verdicts are memoised per snapshot until it is suspect (router_core.decide.prepared): a smaller
            # bound would keep a stale instance in until then.
            handle = info.context
            if isinstance(handle, Handle) and value < handle.scrape.suspect_after_s:
                raise ValueError(f"must be at least scrape.suspect_after_s ({handle.scrape.suspect_after_s:g})")
            return value

    params: Params

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a violation when the instance's state is too old or missing."""
        age, max_age = candidate.eff.age_s, self.params.max_age_s  # age computed once per candidate
        if age is not None and age <= max_age:
            return None
        if age is None and not candidate.eff.suspect:  # engine external: never scraped, by design
            return None
        state = candidate.state
        why = "never scraped" if age is None else f"metrics {age:.1f}s old"
        if state.scrape_error:
            why += f" ({state.scrape_error})"
        return Violation(constraint=self.name, metric="state_age_s", op="<=", value=age, threshold=max_age, reason=why)
