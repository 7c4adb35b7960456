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

__all__ = ["Scorer", "calibrated_threshold", "fold_indices", "fold_splits", "held_out", "left_out"]


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
    confidences: list[float] = []
    for train, test in fold_splits(labels, folds, seed):
        model = fit([texts[i] for i in train], [labels[i] for i in train])
        _, conf = model.score([texts[i] for i in test])
        confidences += conf
    if not confidences:
        return 0.0
    return float(np.clip(np.quantile(np.asarray(confidences), quantile), 0.0, 1.0))


def fold_splits(labels: Sequence[str], folds: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """``(train, test)`` indexes of each fold; a fold whose training part has fewer than two routes is skipped."""
    assignment = fold_indices(labels, folds, seed)
    out = []
    for f in range(folds):
        train = [i for i, a in enumerate(assignment) if a != f]
        test = [i for i, a in enumerate(assignment) if a == f]
        if test and len({labels[i] for i in train}) >= 2:
            out.append((train, test))
    return out


def held_out(labels: Sequence[str], folds: int, seed: int,
             predict: Callable[[list[int], list[int]], tuple[list[str], list[float]]]) -> tuple[list[int], list[str],
                                                                                                list[float]]:
    """Held-out predictions over ``folds`` folds: ``(indexes, route, confidence)`` for every held-out example.

    ``predict(train, test)`` fits on the ``train`` indexes and scores the ``test`` ones (folds as :func:`fold_splits`).
    """
    idx: list[int] = []
    names: list[str] = []
    conf: list[float] = []
    for train, test in fold_splits(labels, folds, seed):
        got, c = predict(train, test)
        idx += test
        names += got
        conf += c
    return idx, names, conf


def left_out(labels: Sequence[str], score_without: Callable[[list[int], list[int]], list[float]], *,
             most: int | None = None, seed: int = 0) -> list[float]:
    """Confidences on each route's examples from a model fitted without that route: the nearest out-of-scope queries.

    ``score_without(keep, out)`` fits on the ``keep`` indexes and returns the confidences of the
    ``out`` ones. Fewer than three routes: none (a model of one route says nothing). With more routes
    than ``most``, a sample of them drawn with ``seed`` is left out, one at a time (each costs a fit).
    """
    routes = sorted(set(labels))
    if len(routes) < 3:
        return []
    if most is not None and len(routes) > most:
        routes = sorted(np.random.default_rng(seed).choice(routes, size=most, replace=False).tolist())
    out: list[float] = []
    for r in routes:
        keep = [i for i, lab in enumerate(labels) if lab != r]
        out += score_without(keep, [i for i, lab in enumerate(labels) if lab == r])
    return out


def accept_threshold(correct: Sequence[bool], confidence: Sequence[float], precision: float, floor: float) -> float:
    """The lowest confidence from which held-out verdicts are right at least ``precision`` of the time, above ``floor``.

    Verdicts are taken from the most confident down; the threshold is the lowest confidence at which
    the share right so far still reaches ``precision``. 1.0 (never accept) when none does.
    """
    order = np.argsort(-np.asarray(confidence, dtype=np.float64), kind="stable")
    best = 1.0
    right = 0
    for n, i in enumerate(order, 1):
        right += bool(correct[i])
        if right / n >= precision and confidence[i] > floor:
            best = float(confidence[i])
    return best


def abstain_threshold(confidence: Sequence[float], abstains_anyway: Sequence[bool], budget: int) -> float:
    """The highest threshold at which at most ``budget`` held-out in-scope examples abstain.

    ``abstains_anyway`` marks examples that abstain whatever the threshold (a background guard); they
    spend the budget first. Returns 0.0 when they alone exceed it.
    """
    spent = sum(bool(a) for a in abstains_anyway)
    rest = sorted(c for c, a in zip(confidence, abstains_anyway, strict=True) if not a)
    left = budget - spent
    if left < 0 or not rest:
        return 0.0
    if left >= len(rest):
        return float(np.nextafter(rest[-1], 2.0))
    # abstain below rest[left]: exactly the ``left`` lowest abstain (ties: fewer)
    return float(rest[left])
