"""The embedding path: all-MiniLM-L6-v2 (offline), capability centroids per route, cosine to the nearest.

Each route's normalised example embeddings are clustered by K-means (seeded) into
K = clamp(n // examples_per_centroid, k_min, k_max) centroids (at most n), re-normalised; a query's
confidence is its cosine to the nearest centroid of any route, clipped to [0, 1]. The model is
:class:`router_core.intents.minilm.MiniLMEncoder` (offline, loaded on first use);
:func:`embedder_missing` says what is not installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
from sklearn.cluster import KMeans  # type: ignore[import-untyped]

from router_core.intents.minilm import minilm_missing

__all__ = ["CentroidModel", "Embedder", "cluster_route", "embedder_missing", "k_for"]

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Texts to L2-normalised rows."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``, one unit-length row each."""
        ...


def embedder_missing() -> str | None:
    """None when MiniLM can load, else which modules are not installed."""
    return minilm_missing()


def k_for(n: int, k_min: int, k_max: int, per_centroid: int) -> int:
    """Centroids for a route of ``n`` examples: clamp(n // per_centroid, k_min, k_max), at most n."""
    return max(1, min(n, max(k_min, min(k_max, n // per_centroid))))


def cluster_route(vectors: Vectors, k: int, seed: int) -> Vectors:
    """K-means (seeded) over one route's normalised rows; returns ``k`` unit-length centroids."""
    if k >= len(vectors):
        centroids = vectors.copy()
    else:
        km = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(vectors)
        centroids = km.cluster_centers_.astype(np.float32)
    norms = np.linalg.norm(centroids, axis=1, keepdims=True)
    return np.asarray(centroids / np.maximum(norms, 1e-12), dtype=np.float32)


class CentroidModel:
    """Nearest capability centroid by cosine over precomputed query vectors."""

    def __init__(self, centroids: dict[str, Vectors]) -> None:
        self.labels = list(centroids)
        self._owner = np.concatenate([np.full(len(c), i) for i, c in enumerate(centroids.values())])
        self._matrix = np.concatenate(list(centroids.values())).astype(np.float32)

    def score_vectors(self, vectors: Vectors) -> tuple[list[str], list[float]]:
        """Return the nearest route and its cosine (clipped to [0, 1]) per row."""
        sims = vectors @ self._matrix.T
        best = sims.argmax(axis=1)
        return ([self.labels[int(self._owner[j])] for j in best],
                [float(np.clip(sims[r, j], 0.0, 1.0)) for r, j in enumerate(best)])


class VectorFit:
    """``fit(texts, labels)`` for calibration over precomputed vectors (texts are keys into them)."""

    def __init__(self, vectors: dict[str, Vectors], k_range: tuple[int, int], per_centroid: int, seed: int) -> None:
        self.vectors = vectors
        self.k_range = k_range
        self.per_centroid = per_centroid
        self.seed = seed

    def __call__(self, texts: list[str], labels: list[str]) -> _VectorScorer:
        """Cluster each route of the training fold."""
        by_route: dict[str, list[str]] = {}
        for t, lab in zip(texts, labels, strict=True):
            by_route.setdefault(lab, []).append(t)
        cents = {r: cluster_route(np.stack([self.vectors[t] for t in ts]),
                                  k_for(len(ts), *self.k_range, self.per_centroid), self.seed)
                 for r, ts in by_route.items()}
        return _VectorScorer(CentroidModel(cents), self.vectors)


class _VectorScorer:
    def __init__(self, model: CentroidModel, vectors: dict[str, Vectors]) -> None:
        self.model = model
        self.vectors = vectors

    def score(self, texts: Sequence[str]) -> tuple[list[str], list[float]]:
        return self.model.score_vectors(np.stack([self.vectors[t] for t in texts]))
