"""Synthetic probes' verdicts: a failed syntax or semantic verdict takes the instance out.

The prober (``probes/``) turns probe results into hysteresis verdicts and hands them to the state
view, which carries them in each instance's snapshot (``InstanceSnapshot.probes``); this filter
only reads them, so a verdict is judged once per snapshot like every other state-only check.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from router_core.framework import Candidate, Handle, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.common import ProbeKind, ProbeVerdict
from schemas.probe import ProbeStatus
from schemas.trace import Violation

__all__ = ["ProbeFilter"]


class ProbeFilter(PluginBase):
    """Rejects instances whose probes failed; scales down the score of those whose latency degraded.

    What it does: ``failed`` on a kind in ``eject_kinds`` (syntax and semantic by default) is a hard
    violation; ``degraded`` (or ``failed``) on a kind in ``soft_kinds`` (latency) a soft one whose
    ``score_factor`` multiplies the candidate's total.
    Inputs consumed: ``InstanceSnapshot.probes`` (kind, verdict, value, threshold, since).
    Parameters: ``eject_kinds``, ``soft_kinds``, ``degraded_factor``.
    Category: filter.
    """

    TYPE: ClassVar[str] = "probe-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "probe"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """Parameters of :class:`ProbeFilter`."""

        eject_kinds: list[ProbeKind] = Field([ProbeKind.SYNTAX, ProbeKind.SEMANTIC],
                                             description="A failed verdict of these kinds takes the instance out.")
        soft_kinds: list[ProbeKind] = Field([ProbeKind.LATENCY],
                                            description="A degraded or failed verdict of these only lowers the score.")
        degraded_factor: float = Field(0.5, ge=0, le=1, description="Score multiplier of a soft probe violation.")

    params: Params

    def __init__(self, name: str, params: Any, handle: Handle) -> None:
        super().__init__(name, params, handle)
        self._eject = frozenset(self.params.eject_kinds)
        self._soft = frozenset(self.params.soft_kinds)

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a hard violation for an ejecting failed verdict, a soft one for a degraded one, else None."""
        probes = candidate.state.probes
        if not probes:
            return None
        soft: ProbeStatus | None = None
        for status in probes:
            if status.verdict is ProbeVerdict.OK:
                continue
            if status.kind in self._eject and status.verdict is ProbeVerdict.FAILED:
                return self._violation(status, "hard")
            if status.kind in self._soft and soft is None:
                soft = status
        return None if soft is None else self._violation(soft, "soft")

    def _violation(self, status: ProbeStatus, severity: str) -> Violation:
        since = status.since.strftime("%H:%M:%S")
        why = f"{status.kind.value} probe {status.verdict.value} since {since}"
        if status.reason:
            why += f": {status.reason}"
        return Violation(constraint=self.name, metric=f"probe_{status.kind.value}", op="ok",
                         value=status.value, threshold=0.0 if status.threshold is None else status.threshold,
                         reason=why[:500],
                         severity="hard" if severity == "hard" else "soft",
                         score_factor=None if severity == "hard" else self.params.degraded_factor)
