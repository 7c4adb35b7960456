"""Only instances in the allowed zones may serve."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from router_core.framework import Candidate, Handle, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.trace import Violation

__all__ = ["ZoneFilter"]


class ZoneFilter(PluginBase):
    """Rejects instances outside ``zones`` (e.g. a data-residency rule, or an AZ being drained).

    What it does: membership test on ``InstanceSpec.zone``.
    Inputs consumed: ``InstanceSpec.zone``.
    Parameters: ``zones`` (at least one; derived from ``router.zones``, not built when that is empty).
    Category: filter.
    """

    TYPE: ClassVar[str] = "zone-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "zone"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """Parameters of :class:`ZoneFilter`."""

        zones: list[str] = Field(min_length=1, description="Zones allowed to serve.")

    params: Params

    def __init__(self, name: str, params: Any, handle: Handle) -> None:
        super().__init__(name, params, handle)
        self.zones = frozenset(self.params.zones)

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a violation when the instance's zone is not allowed."""
        if candidate.spec.zone in self.zones:
            return None
        return Violation(constraint=self.name, metric="zone", op="in", value=None, threshold=float(len(self.zones)),
                         reason=f"zone {candidate.spec.zone!r} not in {sorted(self.zones)}")
