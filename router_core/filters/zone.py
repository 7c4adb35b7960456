"""Only instances in the allowed zones may serve."""

from __future__ import annotations

from typing import ClassVar

from router_core.framework import Candidate, DecisionContext
from schemas.trace import Violation

__all__ = ["ZoneFilter"]


class ZoneFilter:
    """Rejects instances outside ``zones`` (e.g. a data-residency rule, or an AZ being drained).

    What it does: membership test on ``InstanceSpec.zone``.
    Inputs consumed: ``InstanceSpec.zone``.
    Parameters: ``zones`` (``router.zones``; the filter is not built when it is empty).
    Category: filter.
    """

    TYPE: ClassVar[str] = "zone-filter"
    STATE_ONLY: ClassVar[bool] = True

    def __init__(self, zones: list[str], name: str = "zone") -> None:
        self.name = name
        self.zones = frozenset(zones)

    def check(self, candidate: Candidate, ctx: DecisionContext) -> Violation | None:
        """Return a violation when the instance's zone is not allowed."""
        if candidate.spec.zone in self.zones:
            return None
        return Violation(constraint=self.name, metric="zone", op="in", value=None, threshold=float(len(self.zones)),
                         reason=f"zone {candidate.spec.zone!r} not in {sorted(self.zones)}")
