"""Power of two choices: sample two candidates, keep the better, so that gateways do not herd."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Picked, PluginBase, PluginParams, Scored
from router_core.framework.plugin import ExtensionPoint
from router_core.pickers._tiebreak import best_first, rank, rng_for, with_first

__all__ = ["PowerOfTwoPicker", "win_probability"]


class PowerOfTwoPicker(PluginBase):
    """Picks the better of two candidates sampled with a generator seeded by the request id.

    What it does: several gateways seeing the same state do not all send to the same best instance.
    Inputs consumed: the scored feasible candidates and the request id.
    Parameters: none.
    Category: picker (``router.picker: p2c``).
    """

    TYPE: ClassVar[str] = "p2c-picker"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "picker"
    DEFAULT_NAME: ClassVar[str] = "p2c"

    class Params(PluginParams):
        """This picker takes no parameters."""

    def pick(self, request_id: str, scored: Sequence[Scored]) -> Picked:
        """Return the sampled winner first, then the rest best first, with each one's chance."""
        ranked = rank(request_id, scored)
        if len(ranked) < 2:
            return best_first(ranked)
        a, b = rng_for(request_id).sample(ranked, 2)
        ia, ib = ranked.index(a), ranked.index(b)
        winner, at = (a, ia) if (a[1], -ia) >= (b[1], -ib) else (b, ib)
        how = f"p2c: sampled {a[0]} ({a[1]:.3f}) and {b[0]} ({b[1]:.3f}), kept the better"
        n = len(ranked)
        return Picked(with_first(winner[0], ranked), how + f"; seed mmh3({request_id!r})", win_probability(at, n),
                      {iid: win_probability(i, n) for i, (iid, _) in enumerate(ranked)})

    def probabilities(self, request_id: str, scored: Sequence[Scored]) -> dict[str, float]:
        """Each candidate's chance of being chosen, by its rank (ties ordered as :meth:`pick` orders them)."""
        ranked = rank(request_id, scored)
        return {iid: win_probability(i, len(ranked)) for i, (iid, _) in enumerate(ranked)}


def win_probability(position: int, n: int) -> float:
    """Chance that the candidate ranked ``position`` (0 is best) of ``n`` is chosen.

    Two distinct candidates are drawn uniformly and the better-ranked one wins, so the one at
    ``position`` wins exactly when it is drawn with one of the ``n - 1 - position`` ranked below
    it: ``(n - 1 - position) / C(n, 2)``. Over every position these sum to 1.
    """
    if n < 2:
        return 1.0
    return 2.0 * (n - 1 - position) / (n * (n - 1))
