"""The early exit: a query the encoder's first layers already settle does not wait for the rest.

MiniLM's six layers are most of the embedding path's cost (about 1.6 ms of a short query's 2.3 ms
here). Mean-pooled after its first two layers, a query's row already separates most routes: a
joint model (:class:`~router_core.intents.joint.JointModel`, the same features) over those rows
picks about as well as over the final ones where it is sure. So the embedding path first reads
the query with the first ``early_exit_layers`` layers and scores it with a joint model fitted on
the examples' rows at that depth; from the *exit threshold* up that verdict stands (path
``early``), and below it the encoder goes on from the same token states to its last layer and the
full model decides, abstention included.

The exit threshold is calibrated per route set on the same held-out folds as the other two: the
lowest early confidence from which the early verdicts are right at least as often as the full
model's on the same held-out examples (:func:`exit_threshold`), and above a floor that keeps
out-of-scope text on the full path, where abstention is decided: no more than
``fast_unseen_share`` of a left-out route's examples (the nearest out-of-scope queries) may reach
it, as for the fast path. An early verdict nearer to the background than to its route's examples
at that depth goes on as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from router_core.intents.calibrate import fold_splits, left_out
from router_core.intents.fast import GramRow
from router_core.intents.joint import JointModel, choose_neighbour_weight

__all__ = ["EarlyExit", "HeldOutEarly", "exit_threshold", "held_out_early", "left_out_confidences"]

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class EarlyExit:
    """The early joint model, the confidence from which its verdict stands, and the background at its depth."""

    model: JointModel
    threshold: float
    background: Vectors | None

    def verdict(self, text: str, row: Vectors, grams: GramRow | None = None) -> tuple[str, float] | None:
        """``(route, confidence)`` when the early verdict stands; None: the query goes on to the last layer.

        ``grams``: the text's n-gram row, shared with the full model (None: computed here).
        """
        name, conf, _, nearest = self.model.score_one(text, row, grams)
        if conf < self.threshold:
            return None
        bg = self.background  # nearer to small talk than to any example of its route: the full path decides
        if bg is not None and len(bg) and float((bg @ row).max()) > nearest:
            return None
        return name, conf


@dataclass(frozen=True)
class HeldOutEarly:
    """The early model's held-out verdicts, by example index, and the neighbour weight chosen on them."""

    names: dict[int, str]
    confidences: dict[int, float]
    weight: float


def held_out_early(texts: Sequence[str], labels: Sequence[str], rows: Vectors, folds: int, seed: int) -> HeldOutEarly:
    """Fit the early model on each fold's training part, choose its neighbour weight, score the held-out examples."""
    fitted = [(JointModel(seed).fit([texts[i] for i in train], rows[train], [labels[i] for i in train]), test)
              for train, test in fold_splits(labels, folds, seed)]
    weight = choose_neighbour_weight([(m, texts[i], rows[i], labels[i]) for m, test in fitted for i in test])
    names: dict[int, str] = {}
    confidences: dict[int, float] = {}
    for m, test in fitted:
        m.neighbour_weight = weight
        for i in test:
            names[i], confidences[i], _, _ = m.score_one(texts[i], rows[i])
    return HeldOutEarly(names, confidences, weight)


def left_out_confidences(texts: Sequence[str], labels: Sequence[str], rows: Vectors, seed: int, weight: float,
                         most: int = 8) -> list[float]:
    """Early confidences on each route's examples from a model fitted without that route (at most ``most`` routes).

    What the nearest out-of-scope queries look like to the early model
    (:func:`~router_core.intents.calibrate.left_out`).
    """

    def without(keep: list[int], out: list[int]) -> list[float]:
        model = JointModel(seed, neighbour_weight=weight).fit([texts[i] for i in keep], rows[keep],
                                                              [labels[i] for i in keep])
        return [model.score_one(texts[i], rows[i])[1] for i in out]

    return left_out(labels, without, most=most, seed=seed)


def exit_threshold(early_right: Sequence[bool], full_right: Sequence[bool], confidence: Sequence[float],
                   floor: float) -> float:
    """The lowest early confidence from which the early verdicts are right at least as often as the full model's.

    Held-out examples are taken from the most confident (early) down; the threshold is the lowest
    confidence, above ``floor``, at which the early model has so far been right no fewer times than
    the full model on the same examples. 1.0 (never exit) when none is.
    """
    order = np.argsort(-np.asarray(confidence, dtype=np.float64), kind="stable")
    best = 1.0
    lead = 0
    for i in order:
        lead += int(bool(early_right[i])) - int(bool(full_right[i]))
        if lead >= 0 and confidence[i] > floor:
            best = float(confidence[i])
    return best
