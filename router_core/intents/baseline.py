"""The seed's method (seed 003 §2.2), kept as the baseline ``routelens intents eval --method centroids`` measures.

Each route's MiniLM embeddings are clustered by K-means into capability centroids; a query goes to
the nearest centroid by cosine, and abstains below the ``calibration_quantile`` of held-out
in-scope cosines. The router does not use it: :class:`~router_core.intents.classifier.IntentClassifier`
beats it or ties on every set measured (``docs/policies.md``, Intents).
"""

from __future__ import annotations

import numpy as np

from router_core.intents.calibrate import calibrated_threshold
from router_core.intents.cut import cut_to_tokens
from router_core.intents.embedding import CentroidModel, Embedder, VectorFit, cluster_route, k_for
from schemas.config.intents import IntentSettings
from schemas.trace_policy import IntentVerdict

__all__ = ["CentroidBaseline"]


class CentroidBaseline:
    """Nearest capability centroid (K-means per route), calibrated on held-out folds.

    Args:
        routes: Route name -> example utterances.
        settings: K range, folds, quantile, seed, cut bound.
        embedder: The embedding model.
    """

    def __init__(self, routes: dict[str, list[str]], settings: IntentSettings, embedder: Embedder) -> None:
        s = settings
        self.settings = settings
        self._embedder = embedder
        texts = [t for ts in routes.values() for t in ts]
        labels = [r for r, ts in routes.items() for _ in ts]
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        by_text = dict(zip(texts, vectors, strict=True))
        cents = {}
        for r, ts in routes.items():
            rows = np.stack([by_text[t] for t in ts])
            cents[r] = cluster_route(rows, k_for(len(ts), s.k_min, s.k_max, s.examples_per_centroid), s.seed)
        self._model = CentroidModel(cents)
        fit = VectorFit(by_text, (s.k_min, s.k_max), s.examples_per_centroid, s.seed)
        self.threshold = calibrated_threshold(texts, labels, fit, folds=s.folds, quantile=s.calibration_quantile,
                                              seed=s.seed)

    def classify(self, text: str) -> IntentVerdict:
        """The nearest centroid's route, or an abstention below the threshold."""
        text, cut = cut_to_tokens(text, self.settings.max_tokens)
        names, sims = self._model.score_vectors(np.asarray(self._embedder.embed([text]), dtype=np.float32))
        abstained = sims[0] < self.threshold
        return IntentVerdict(label=None if abstained else names[0], nearest=names[0], confidence=sims[0],
                             threshold=self.threshold, abstained=abstained, path="embedding", cut_tokens=cut)
