"""SetCalibration: a route set's thresholds from held-out folds of its examples, and the background guard.

:meth:`IntentClassifier.fit_embedding <router_core.intents.classifier.IntentClassifier.fit_embedding>`
calibrates once per route set (the figures are cached beside the routes): the fast path's accept
threshold, the joint model's abstain threshold and neighbour weight, the early exit's threshold, and
whether the background guard stays on. The guard (:meth:`SetCalibration._guarded`) is what the
calibration weighs and what the embedding path then applies to each query.

The classifier inherits these methods; they read the route set it holds (the attributes declared below).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from router_core.intents.background import gibberish, has_cjk, is_gibberish
from router_core.intents.calibrate import abstain_threshold, accept_threshold, fold_splits, held_out, left_out
from router_core.intents.early import exit_threshold, held_out_early, left_out_confidences
from router_core.intents.embedding import Vectors
from router_core.intents.fast import FastModel
from router_core.intents.joint import JointModel, choose_neighbour_weight
from schemas.config.intents import IntentSettings

__all__ = ["SetCalibration"]

# Held-out fires of the background guard that say nothing of what a set is about: a set of 48 examples has an
# abstention budget of 1, and one example nearer to a random string than to its route's others would drop the guard.
_GUARD_NOISE = 2


class SetCalibration:
    """A route set's held-out calibration and the background guard, for the classifier to inherit.

    Reads the set :class:`~router_core.intents.classifier.IntentClassifier` holds: its settings,
    examples and labels, fast model, the encoder's vocabulary, the background rows kept and the
    early exit's depth.
    """

    settings: IntentSettings
    _texts: list[str]
    _labels: list[str]
    _fast: FastModel
    _vocabulary: frozenset[str]
    _background: Vectors | None
    _early_layers: int

    @staticmethod
    def _threshold(value: float | str, calibrate: Callable[[], float]) -> float:
        return float(value) if not isinstance(value, str) else float(calibrate())

    def _calibrate(self, vectors: Vectors, rows: Vectors | None = None, bg_rows: Vectors | None = None,
                   ) -> dict[str, float]:
        """The thresholds from the same held-out folds; the figures :attr:`calibration` reports.

        ``rows``: the examples' rows after the early exit's layers (None: no early exit), ``bg_rows``
        the background's at that depth.
        """
        s, texts, labels = self.settings, self._texts, self._labels
        background = self._background

        def fast(train: list[int], test: list[int]) -> tuple[list[str], list[float]]:
            return FastModel(s.seed).fit([texts[i] for i in train], [labels[i] for i in train]).score(
                [texts[i] for i in test])

        f_idx, f_names, f_conf = held_out(labels, s.folds, s.seed, fast)
        # The joint model's folds are fitted once; the neighbour weight is chosen on them, then they are scored with it.
        folds = [(JointModel(s.seed).fit([texts[i] for i in train], vectors[train], [labels[i] for i in train]), train,
                  test) for train, test in fold_splits(labels, s.folds, s.seed)]
        weight = choose_neighbour_weight([(m, texts[i], vectors[i], labels[i]) for m, _, test in folds for i in test])
        j_idx: list[int] = []
        j_names: list[str] = []
        j_conf: list[float] = []
        guard: dict[int, bool] = {}
        for m, train, test in folds:
            m.neighbour_weight = weight
            for i in test:
                name, conf, _, _ = m.score_one(texts[i], vectors[i])
                j_idx.append(i)
                j_names.append(name)
                j_conf.append(conf)
                guard[i] = self._guarded(texts[i], vectors[i], background,
                                         vectors[[j for j in train if labels[j] == name]])
        fast_by = {i: (n, c) for i, n, c in zip(f_idx, f_names, f_conf, strict=True)}
        gib = self._fast.score(gibberish(50, s.seed + 1))[1]
        # A route left out stands for the out-of-scope query nearest to the set: the fast path may not
        # accept most of those (they would never reach the abstaining slow path).
        unseen = _left_out_confidences(texts, labels, s.seed)
        floor = max([*gib, float(np.quantile(unseen, 1 - s.fast_unseen_share)) if unseen else 0.0])
        accept = self._threshold(s.fast_threshold, lambda: accept_threshold(
            [labels[i] == n for i, n in zip(f_idx, f_names, strict=True)], f_conf, s.fast_precision, floor))
        slow = [k for k, i in enumerate(j_idx) if fast_by[i][1] < accept]
        budget = int(s.calibration_quantile * len(j_idx))
        # The background guard is no use where the embedding cannot tell the set's text from small talk
        # (MiniLM on Chinese): it would spend over half the abstention budget on in-scope examples.
        # A few fires are noise (an example nearer a random string than its route's others); a set about small
        # talk fires on many (the shipped routes' chat route: 8 of 120).
        fired = sum(guard[j_idx[k]] for k in slow)
        use_guard = fired <= max(budget / 2, _GUARD_NOISE)
        if not use_guard:  # gibberish still abstains
            guard = {i: is_gibberish(texts[i], self._vocabulary) for i in guard}
        threshold = self._threshold(s.embedding_threshold, lambda: min(1.0, abstain_threshold(
            [j_conf[k] for k in slow], [guard[j_idx[k]] for k in slow], budget)))
        n = len(j_idx) or 1
        exits, early = ({}, {}) if rows is None else self._calibrate_exit(
            rows, bg_rows if use_guard else None, [j_idx[k] for k in slow], dict(zip(j_idx, j_names, strict=True)))
        right = abstained = 0
        for k, i in enumerate(j_idx):
            name, conf = fast_by[i]
            if is_gibberish(texts[i], self._vocabulary):
                abstained += 1
                continue
            if i in exits:
                name = exits[i]
            elif conf < accept:
                name = j_names[k]
                if guard[i] or j_conf[k] < threshold:
                    abstained += 1
                    continue
            right += name == labels[i]
        return {**early, "held_out_early_share": round(len(exits) / n, 4),
                "fast_threshold": accept, "embedding_threshold": threshold, "neighbour_weight": weight,
                "fast_floor": round(floor, 4),
                "background_guard": float(use_guard), "held_out_guard_fired": float(fired),
                "held_out": float(len(j_idx)), "held_out_fast_share": round(1 - len(slow) / n, 4),
                "held_out_accuracy": round(right / n, 4), "held_out_false_abstain": round(abstained / n, 4),
                "folds": float(s.folds), "quantile": s.calibration_quantile}

    def _calibrate_exit(self, rows: Vectors, bg_rows: Vectors | None, slow: list[int], full: dict[int, str],
                        ) -> tuple[dict[int, str], dict[str, float]]:
        """The early exit's threshold on the held-out examples that reach it (``slow``), and their early verdicts.

        ``full``: the full model's held-out pick of each example. Returns the held-out examples that
        exit early (index -> route) and the figures (threshold, neighbour weight, floor).
        """
        s, texts, labels = self.settings, self._texts, self._labels
        held = held_out_early(texts, labels, rows, s.folds, s.seed)
        unseen = left_out_confidences(texts, labels, rows, s.seed, held.weight)
        floor = float(np.quantile(unseen, 1 - s.fast_unseen_share)) if unseen else 0.0
        t = exit_threshold([held.names[i] == labels[i] for i in slow], [full[i] == labels[i] for i in slow],
                           [held.confidences[i] for i in slow], floor)
        exits: dict[int, str] = {}
        for i in slow:
            name = held.names[i]
            if held.confidences[i] < t:
                continue
            own = rows[[j for j, lab in enumerate(labels) if lab == name and j != i]]
            if bg_rows is None or not _nearer_background(rows[i], bg_rows, own):
                exits[i] = name
        return exits, {"early_threshold": t, "early_neighbour_weight": held.weight, "early_floor": round(floor, 4),
                       "early_layers": float(self._early_layers)}

    def _guarded(self, text: str, vec: Vectors, background: Vectors | None, own: Vectors) -> bool:
        """Whether the background guard abstains: gibberish, or Latin text nearer the background than its route.

        ``background`` None: the set's calibration turned the embedding guard off; gibberish still abstains.
        """
        if is_gibberish(text, self._vocabulary):
            return True
        return background is not None and not has_cjk(text) and _nearer_background(vec, background, own)


def _left_out_confidences(texts: list[str], labels: list[str], seed: int) -> list[float]:
    """Fast-path confidences on each route's examples from a model fitted without that route (every route)."""

    def without(keep: list[int], out: list[int]) -> list[float]:
        model = FastModel(seed).fit([texts[i] for i in keep], [labels[i] for i in keep])
        return model.score([texts[i] for i in out])[1]

    return left_out(labels, without)


def _nearer_background(vec: Vectors, background: Vectors, own: Vectors) -> bool:
    """Whether ``vec`` lies nearer to some background row than to every row of ``own`` (its route's examples)."""
    if len(background) == 0:
        return False
    if len(own) == 0:
        return True
    return float((background @ vec).max()) > float((own @ vec).max())

