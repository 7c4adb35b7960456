"""Choosing among scored candidates: the best, or a seeded sample so gateways do not herd.

Randomness comes from the request id (mmh3), so the same request always picks the same way and a
replay reproduces it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from operator import itemgetter

import mmh3

__all__ = ["Scored", "pick"]

Scored = tuple[str, float]  # (instance id, total)


def _order(request_id: str, scored: Sequence[Scored]) -> list[Scored]:
    """Best first; exact ties broken by ``mmh3(request_id:instance)`` so requests spread over equals.

    Equal inputs give bit-identical totals (an idle fleet scores all 1.0), so exact equality is
    what identifies a tie.
    """
    ranked = sorted(scored, key=itemgetter(1), reverse=True)
    i, n = 0, len(ranked)
    while i < n - 1:
        j = i + 1
        while j < n and ranked[j][1] == ranked[i][1]:
            j += 1
        if j - i > 1:
            ranked[i:j] = sorted(ranked[i:j], key=lambda s: mmh3.hash(f"{request_id}:{s[0]}", signed=False))
        i = j
    return ranked


def pick(kind: str, request_id: str, scored: Sequence[Scored], temperature: float = 0.05) -> tuple[list[str], str]:
    """Return the instance ids in attempt order and a sentence saying how the first was chosen.

    Args:
        kind: ``max``, ``p2c`` (power of two choices) or ``softmax``.
        request_id: Seeds ties and sampling.
        scored: Candidates with their totals.
        temperature: Softmax temperature (lower: closer to max).
    """
    ranked = _order(request_id, scored)
    if not ranked:
        return [], "nothing to pick"
    if len(ranked) < 2 or kind == "max":
        margin = ranked[0][1] - ranked[1][1] if len(ranked) > 1 else 0.0
        how = f"max score {ranked[0][1]:.3f}, margin {margin:.3f}; ties by mmh3(request_id:instance)"
        return [iid for iid, _ in ranked], how
    rng = random.Random(mmh3.hash(request_id, signed=False))
    if kind == "p2c":
        a, b = rng.sample(ranked, 2)
        winner = a if (a[1], -ranked.index(a)) >= (b[1], -ranked.index(b)) else b
        how = f"p2c: sampled {a[0]} ({a[1]:.3f}) and {b[0]} ({b[1]:.3f}), kept the better"
    else:
        top = ranked[0][1]
        weights = [math.exp((total - top) / temperature) for _, total in ranked]
        winner = rng.choices(ranked, weights=weights, k=1)[0]
        how = f"softmax T={temperature:g}: sampled {winner[0]} ({winner[1]:.3f}) of {len(ranked)}"
    rest = [iid for iid, _ in ranked if iid != winner[0]]
    return [winner[0], *rest], how + f"; seed mmh3({request_id!r})"
