"""The best total wins; exact ties are spread by the request id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Picked, PluginBase, PluginParams, Scored
from router_core.framework.plugin import ExtensionPoint
from router_core.pickers._tiebreak import best_first, rank

__all__ = ["MaxScorePicker"]


class MaxScorePicker(PluginBase):
    """Picks the highest total.

    What it does: ranks by total, best first; exact ties by ``mmh3(request_id:instance)``.
    Inputs consumed: the scored feasible candidates and the request id.
    Parameters: none.
    Category: picker (``router.picker: max``, the default).
    """

    TYPE: ClassVar[str] = "max-score-picker"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "picker"
    DEFAULT_NAME: ClassVar[str] = "max"

    class Params(PluginParams):
        """This picker takes no parameters."""

    def pick(self, request_id: str, scored: Sequence[Scored]) -> Picked:
        """Return the ranking and the winner's margin over the runner-up."""
        return best_first(rank(request_id, scored))
