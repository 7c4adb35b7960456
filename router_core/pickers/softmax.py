"""Softmax sampling over totals: mostly the best, sometimes a close second, so that gateways do not herd."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from router_core.framework import Picked, PluginBase, PluginParams, Scored
from router_core.framework.plugin import ExtensionPoint
from router_core.pickers._tiebreak import best_first, rank, rng_for, with_first

__all__ = ["SoftmaxPicker"]


class SoftmaxPicker(PluginBase):
    """Samples one candidate with probability ``exp((total - best) / temperature)``, seeded by the request id.

    What it does: spreads load over near-equal instances; lower temperatures approach max-score.
    Inputs consumed: the scored feasible candidates and the request id.
    Parameters: ``temperature`` (derived from ``router.softmax_temperature``).
    Category: picker (``router.picker: softmax``).
    """

    TYPE: ClassVar[str] = "softmax-picker"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "picker"
    DEFAULT_NAME: ClassVar[str] = "softmax"

    class Params(PluginParams):
        """Parameters of :class:`SoftmaxPicker`."""

        temperature: float = Field(0.05, gt=0, description="Lower: closer to always picking the best.")

    params: Params

    def pick(self, request_id: str, scored: Sequence[Scored]) -> Picked:
        """Return the sampled winner first, then the rest best first, with each one's chance."""
        ranked = rank(request_id, scored)
        if len(ranked) < 2:
            return best_first(ranked)
        temperature, top = self.params.temperature, ranked[0][1]
        weights = [math.exp((total - top) / temperature) for _, total in ranked]
        winner = rng_for(request_id).choices(ranked, weights=weights, k=1)[0]
        how = f"softmax T={temperature:g}: sampled {winner[0]} ({winner[1]:.3f}) of {len(ranked)}"
        norm = math.fsum(weights)
        chances = {iid: w / norm for (iid, _), w in zip(ranked, weights, strict=True)}
        return Picked(with_first(winner[0], ranked), how + f"; seed mmh3({request_id!r})", chances[winner[0]],
                      chances)

    def probabilities(self, request_id: str, scored: Sequence[Scored]) -> dict[str, float]:
        """Each candidate's chance of being chosen: ``exp((total - best) / T)``, normalised."""
        if not scored:
            return {}
        top = max(total for _, total in scored)
        weights = {iid: math.exp((total - top) / self.params.temperature) for iid, total in scored}
        norm = math.fsum(weights.values())
        return {iid: w / norm for iid, w in weights.items()}
