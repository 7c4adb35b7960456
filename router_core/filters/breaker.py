"""Instances whose instance, model or zone breaker is open are not candidates (half-open: trials only).

The breakers live in the gateway's :class:`router_core.resilience.breakers.BreakerBoard`, fed by
attempt outcomes between scrapes; the gateway binds its board to this filter (:func:`bind_board`).
A router without a gateway (replay, the decide bench before binding) sees every breaker closed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from router_core.framework import Candidate, Handle, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from router_core.resilience.breaker import BreakerState
from router_core.resilience.breakers import BreakerBoard
from schemas.trace import Violation

__all__ = ["BreakerFilter", "bind_board"]


class BreakerFilter(PluginBase):
    """Rejects instances behind an open breaker, or a half-open one whose trial slots are all taken.

    What it does: asks the bound board for the first blocking breaker of the instance, its model and
    its zone; the violation names the scope, the state and the reason the breaker opened.
    Inputs consumed: the gateway's breaker board (not the snapshot: breakers move between scrapes).
    Parameters: none.
    Category: filter.
    """

    TYPE: ClassVar[str] = "breaker-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "breaker"
    STATE_ONLY: ClassVar[bool] = False  # the board changes between snapshots

    class Params(PluginParams):
        """Parameters of :class:`BreakerFilter` (none)."""

    params: Params

    def __init__(self, name: str, params: Any, handle: Handle) -> None:
        super().__init__(name, params, handle)
        self._board: BreakerBoard | None = None

    def bind(self, board: BreakerBoard) -> None:
        """Read ``board`` from now on (the gateway's)."""
        self._board = board

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a hard violation when a breaker of the candidate lets nothing through, else None."""
        board = self._board
        if board is None:
            return None
        b = board.blocking(candidate.spec)
        if b is None:
            return None
        what = "open" if b.state is BreakerState.OPEN else "half-open, trial slots taken"
        return Violation(constraint=self.name, metric=f"breaker_{b.scope}", op="closed", value=float(b.state),
                         threshold=0.0, reason=f"{b.scope} breaker {b.name} {what}: {b.reason}"[:500])


def bind_board(board: BreakerBoard, filters: Iterable[object]) -> int:
    """Bind ``board`` to every breaker filter among ``filters``; return how many."""
    n = 0
    for f in filters:
        if isinstance(f, BreakerFilter):
            f.bind(board)
            n += 1
    return n
