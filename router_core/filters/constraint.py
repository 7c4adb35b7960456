"""A configured hard constraint, as its hysteresis latch in the state snapshot says."""

from __future__ import annotations

from typing import Any, ClassVar

from router_core.framework import Candidate, Handle, PluginBase, RequestContext
from router_core.framework.plugin import ExtensionPoint
from router_core.state.constraints import applies, holds, metric_value, ramp_factor
from schemas.config import ConstraintRule, ConstraintSpec
from schemas.trace import Violation

__all__ = ["ConstraintFilter"]


class ConstraintFilter(PluginBase):
    """Keeps instances whose latch for this constraint is in; soft-penalises the ramp zone.

    What it does: reads the latch the state view evaluated with hysteresis (exit after
    ``exit_for`` s above ``threshold``, re-enter after ``enter_for`` s below ``enter_below``).
    When the snapshot has no latch for this constraint (a replay under another policy, or a
    constraint added since), it judges the snapshot's value instantaneously.
    Inputs consumed: ``InstanceSnapshot.latches`` and the metric named by the spec.
    Parameters: :class:`schemas.config.ConstraintRule` (an entry of ``constraints:`` without its
    name; the plugin's name names the constraint and its latch).
    Category: filter.
    """

    TYPE: ClassVar[str] = "constraint-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = ""  # a constraint must be named: ConstraintSpec refuses ""
    STATE_ONLY: ClassVar[bool] = True

    class Params(ConstraintRule):
        """Parameters of :class:`ConstraintFilter`: a :class:`schemas.config.ConstraintRule`."""

    params: Params

    def __init__(self, name: str, params: Any, handle: Handle) -> None:
        super().__init__(name, params, handle)
        self.spec = spec = ConstraintSpec(name=name, **dict(params))
        self._scoped = bool(spec.models or spec.instances)
        self._soft = spec.soft_threshold is not None

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a hard violation when latched out, a soft one inside the ramp zone, else None."""
        spec, state = self.spec, candidate.state
        if self._scoped and not applies(spec, candidate.spec):
            return None
        for latch in state.latches:
            if latch.constraint == self.name:
                if not latch.out and not self._soft:
                    return None  # the common case: latched in, no ramp to apply
                out, value, since = latch.out, latch.value, latch.since
                break
        else:
            value = metric_value(spec, state, candidate.eff)
            out, since = not holds(spec, value, spec.threshold), None
        if out:
            shown = "no data" if value is None else f"{spec.metric} {value:.4g}"
            return Violation(constraint=spec.name, metric=spec.metric, op=spec.op, value=value,
                             threshold=spec.threshold, since=since,
                             reason=f"{shown} broke {spec.op} {spec.threshold:g}; latched out until "
                                    f"{spec.enter_bound:g} holds for {spec.enter_for:g}s")
        factor = ramp_factor(spec, value)
        if factor >= 1.0:
            return None
        return Violation(constraint=spec.name, metric=spec.metric, op=spec.op, value=value,
                         threshold=spec.soft_threshold if spec.soft_threshold is not None else spec.threshold,
                         severity="soft", score_factor=factor,
                         reason=f"{spec.metric} {value} in the ramp zone: score x{factor:.2f}")
