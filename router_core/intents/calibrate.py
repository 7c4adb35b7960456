"""Per-route-set abstain thresholds from held-out folds of the training examples only.

Each fold's model is fitted on the other folds and scores its held-out examples; the threshold is
the ``quantile`` of those in-scope confidences, so about ``1 - quantile`` of in-scope queries
clear it. Why folds and not an out-of-scope background set: a background set would have to fit
every deployment's traffic, while the folds need nothing but the routes file, and the miss rate on
in-scope queries (false abstain) is the quantity the operator sets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

__all__ = ["Scorer", "calibrated_threshold", "fold_indices"]


class Scorer(Protocol):
    """A fitted model: the nearest route and its confidence in [0, 1] per text."""

    def score(self, texts: Sequence[str]) -> tuple[list[str], list[float]]:
        """Return ``(nearest, confidence)`` per text."""
        ...


def fold_indices(labels: Sequence[str], folds: int, seed: int) -> list[int]:
    """Assign each example a fold, stratified by label and shuffled with ``seed``."""
    rng = np.random.default_rng(seed)
    out = [0] * len(labels)
    for label in sorted(set(labels)):
        idx = [i for i, lab in enumerate(labels) if lab == label]
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            out[i] = j % folds
    return out


def calibrated_threshold(texts: Sequence[str], labels: Sequence[str], fit: Callable[[list[str], list[str]], Scorer],
                         *, folds: int = 5, quantile: float = 0.05, seed: int = 0) -> float:
    """The ``quantile`` of held-out in-scope confidences over ``folds`` folds, in [0, 1].

    Args:
        texts: Training utterances.
        labels: Their routes.
        fit: Builds a model from ``(texts, labels)``.
        folds: Number of folds (a route with fewer examples is held out where it has them).
        quantile: Share of in-scope held-out examples allowed below the threshold.
        seed: Seeds the fold assignment.
    """
    assignment = fold_indices(labels, folds, seed)
    confidences: list[float] = []
    for f in range(folds):
        train = [i for i, a in enumerate(assignment) if a != f]
        test = [i for i, a in enumerate(assignment) if a == f]
        if not test or len({labels[i] for i in train}) < 2:
            continue
        model = fit([texts[i] for i in train], [labels[i] for i in train])
        _, conf = model.score([texts[i] for i in test])
        confidences += conf
    if not confidences:
        return 0.0
    return float(np.clip(np.quantile(np.asarray(confidences), quantile), 0.0, 1.0))
