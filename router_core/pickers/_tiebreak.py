"""Ordering shared by pickers: best first, exact ties broken by the request id (like GAIE's picker/common.go).

Randomness comes from the request id (mmh3), so the same request always picks the same way and a
replay reproduces it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from operator import itemgetter

import mmh3

from router_core.framework import Picked, Scored

__all__ = ["best_first", "rank", "rng_for", "tie_key", "with_first"]


def tie_key(request_id: str, instance: str) -> int:
    """Where ``instance`` stands among instances tied on total for ``request_id``: the lowest goes first."""
    return mmh3.hash(f"{request_id}:{instance}", signed=False)


def rank(request_id: str, scored: Sequence[Scored]) -> list[Scored]:
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
            ranked[i:j] = sorted(ranked[i:j], key=lambda s: tie_key(request_id, s[0]))
        i = j
    return ranked


def rng_for(request_id: str) -> random.Random:
    """A generator seeded by the request id: sampling pickers draw from it, never from global state."""
    return random.Random(mmh3.hash(request_id, signed=False))


def with_first(winner: str, ranked: Sequence[Scored]) -> list[str]:
    """``winner`` first, then the rest in ranked order (the fallbacks)."""
    return [winner, *(iid for iid, _ in ranked if iid != winner)]


def best_first(ranked: Sequence[Scored]) -> Picked:
    """The ranking as it is, with the winner's margin over the runner-up (the max-score answer).

    With no runner-up there is no margin (None) and no tie to break: the sentence says so.
    """
    if not ranked:
        return Picked([], "nothing to pick")
    if len(ranked) == 1:  # no runner-up: no margin (None), and nothing tied
        return Picked([ranked[0][0]], f"max score {ranked[0][1]:.3f}; the only feasible candidate")
    margin = ranked[0][1] - ranked[1][1]
    return Picked([iid for iid, _ in ranked],
                  f"max score {ranked[0][1]:.3f}, margin {margin:.3f}; ties by mmh3(request_id:instance)")
