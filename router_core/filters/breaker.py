"""Instances whose instance, model or zone breaker is open are not candidates (half-open: trials only).

The breakers live in the gateway's :class:`router_core.resilience.breakers.BreakerBoard`, fed by
attempt outcomes between scrapes. The gateway asks the board once per request which instances it
blocks and hands the answer to the decision (``RequestContext.blocked``); the trace records it, so
a replay sees the breakers as the live decision did. A context without it sees every breaker closed.
"""

from __future__ import annotations

from typing import Any, ClassVar

from router_core.framework import Candidate, Handle, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.trace import Violation

__all__ = ["BreakerFilter"]


class BreakerFilter(PluginBase):
    """Rejects instances behind an open breaker, or a half-open one whose trial slots are all taken.

    What it does: looks the instance up in the request's blocked instances (its own, its model's or
    its zone's breaker, as the gateway's board saw them); the violation names the scope, the state
    and the reason the breaker opened.
    Inputs consumed: ``RequestContext.blocked`` (not the snapshot: breakers move between scrapes).
    Parameters: none.
    Category: filter.
    """

    TYPE: ClassVar[str] = "breaker-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "breaker"
    STATE_ONLY: ClassVar[bool] = False  # breakers change between snapshots

    class Params(PluginParams):
        """Parameters of :class:`BreakerFilter` (none)."""

    params: Params

    def __init__(self, name: str, params: Any, handle: Handle) -> None:
        super().__init__(name, params, handle)

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a hard violation when a breaker of the candidate lets nothing through, else None."""
        b = ctx.blocked.get(candidate.spec.id) if ctx.blocked else None
        if b is None:
            return None
        return Violation(constraint=self.name, metric=f"breaker_{b.scope}", op="closed", value=float(b.state),
                         threshold=0.0, reason=b.reason)
