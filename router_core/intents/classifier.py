"""IntentClassifier: the router's semantic-intent call, fast path first, MiniLM for the unsure.

``classify(text)`` cuts the text at ``max_tokens``, runs the character n-gram fast path and, when
its confidence is below the fast threshold and ``escalate`` is on, the embedding path (nearest
capability centroid). Below the final path's threshold the verdict abstains (``label`` None,
``nearest`` kept) and the rule layer decides. Thresholds are calibrated per route set
(:mod:`router_core.intents.calibrate`) unless configured as numbers. Without torch, transformers
or the model package the classifier runs the fast path only and :attr:`embedding_status` says why.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np

from router_core.intents.cache import CacheEntry, CentroidCache, cache_path_for
from router_core.intents.calibrate import calibrated_threshold
from router_core.intents.cut import cut_to_tokens
from router_core.intents.embedding import (
    CentroidModel,
    Embedder,
    VectorFit,
    cluster_route,
    embedder_missing,
    k_for,
)
from router_core.intents.fast import FastModel, fit_fast
from router_core.intents.minilm import MODEL_NAME, MiniLMEncoder
from router_core.intents.routes import load_routes, route_hash
from schemas.config.intents import IntentSettings
from schemas.errors import ConfigError
from schemas.trace_policy import IntentVerdict

__all__ = ["IntentClassifier"]

class IntentClassifier:
    """Classify query text into one of the routes, or abstain.

    Args:
        routes: Route name -> example utterances (at least two routes).
        settings: Thresholds, K range, cut bound, seed.
        cache_path: The centroid cache (None: no cache file).
        embedder: The embedding model (None: MiniLM at ``settings.embedding_precision`` when installed, else
            the fast path only).
    """

    def __init__(self, routes: dict[str, list[str]], settings: IntentSettings, *, cache_path: Path | None = None,
                 embedder: Embedder | None = None) -> None:
        if len(routes) < 2:
            raise ConfigError(settings.routes, [(None, "routes", "at least two routes are needed")])
        self.routes = routes
        self.settings = settings
        self.cache_path = cache_path
        self.embedding_status = None if embedder is not None else embedder_missing()
        if embedder is None and self.embedding_status is None:
            embedder = MiniLMEncoder(settings.embedding_precision)
        self._embedder = embedder
        # The cache's model key: vectors of another model or precision are never mixed with these.
        self.model_id: str = getattr(embedder, "model_id", MODEL_NAME)
        self._texts = [t for ts in routes.values() for t in ts]
        self._labels = [r for r, ts in routes.items() for _ in ts]
        self._fast = FastModel(settings.seed).fit(self._texts, self._labels)
        self.fast_threshold = self._threshold(settings.fast_threshold, lambda: calibrated_threshold(
            self._texts, self._labels, fit_fast(settings.seed), folds=settings.folds,
            quantile=settings.calibration_quantile, seed=settings.seed))
        self._centroids: CentroidModel | None = None
        self.embedding_threshold: float | None = None
        self.reclustered: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: IntentSettings, base_dir: str | Path = ".",
                      embedder: Embedder | None = None) -> IntentClassifier:
        """Load the routes file (relative to ``base_dir``) with its cache beside it."""
        path = Path(base_dir) / settings.routes
        return cls(load_routes(path), settings, cache_path=cache_path_for(path), embedder=embedder)

    @staticmethod
    def _threshold(value: float | str, calibrate: Callable[[], float]) -> float:
        return float(value) if not isinstance(value, str) else float(calibrate())

    @property
    def has_embedding(self) -> bool:
        """Whether the embedding path can run."""
        return self._embedder is not None

    def _set_hash(self) -> str:
        s = self.settings
        key = [[r, route_hash(ts)] for r, ts in self.routes.items()] + [
            s.k_min, s.k_max, s.examples_per_centroid, s.folds, s.calibration_quantile, s.seed]
        return hashlib.sha256(repr(key).encode()).hexdigest()[:16]

    def fit_embedding(self) -> None:
        """Embed and cluster the routes whose cache entry is stale, calibrate, save the cache."""
        with self._lock:
            if self._centroids is not None or self._embedder is None:
                return
            s = self.settings
            path = self.cache_path
            cache = CentroidCache.load(path, self.model_id) if path is not None else CentroidCache(self.model_id)
            fresh: dict[str, CacheEntry] = {}
            self.reclustered = []
            for route, texts in self.routes.items():
                h = route_hash(texts)
                entry = cache.routes.get(route)
                if entry is None or entry.hash != h:
                    vectors = self._embedder.embed(texts)
                    k = k_for(len(texts), s.k_min, s.k_max, s.examples_per_centroid)
                    entry = CacheEntry(h, vectors, cluster_route(vectors, k, s.seed))
                    self.reclustered.append(route)
                fresh[route] = entry
            set_hash = self._set_hash()
            thresholds = {k: v for k, v in cache.thresholds.items() if k == set_hash}
            if isinstance(s.embedding_threshold, str):
                if set_hash not in thresholds:
                    by_text = {t: row for e, ts in zip(fresh.values(), self.routes.values(), strict=True)
                               for t, row in zip(ts, e.embeddings, strict=True)}
                    fit = VectorFit(by_text, (s.k_min, s.k_max), s.examples_per_centroid, s.seed)
                    thresholds[set_hash] = calibrated_threshold(self._texts, self._labels, fit, folds=s.folds,
                                                                quantile=s.calibration_quantile, seed=s.seed)
                self.embedding_threshold = thresholds[set_hash]
            else:
                self.embedding_threshold = float(s.embedding_threshold)
            if path is not None and (self.reclustered or thresholds != cache.thresholds
                                     or list(fresh) != list(cache.routes)):
                CentroidCache(self.model_id, fresh, thresholds).save(path)
            self._centroids = CentroidModel({r: e.centroids for r, e in fresh.items()})

    def classify(self, text: str, *, escalate: bool | None = None) -> IntentVerdict:
        """Return the verdict for ``text`` (never stored: only the label, scores and the cut are).

        Args:
            text: The query text.
            escalate: Override the settings' ``escalate`` for this call.
        """
        text, cut = cut_to_tokens(text, self.settings.max_tokens)
        nearest, conf = (x[0] for x in self._fast.score([text]))
        assert isinstance(nearest, str) and isinstance(conf, float)
        go = self.settings.escalate if escalate is None else escalate
        band = self.fast_threshold * self.settings.escalate_band
        if conf >= self.fast_threshold or conf < band or not go or self._embedder is None:
            return _verdict(nearest, conf, self.fast_threshold, "fast", cut)
        self.fit_embedding()
        assert self._centroids is not None and self.embedding_threshold is not None
        vec = self._embedder.embed([text])
        names, sims = self._centroids.score_vectors(np.asarray(vec, dtype=np.float32))
        verdict = _verdict(names[0], sims[0], self.embedding_threshold, "embedding", cut)
        if verdict.label is not None and verdict.label != nearest and self.settings.escalate_needs_agreement:
            # The fast path was unsure and the embedding path names another route: a near neighbour of
            # two routes is more often out of scope than either; abstain (the rule layer decides).
            return verdict.model_copy(update={"label": None, "abstained": True})
        return verdict


def _verdict(nearest: str, conf: float, threshold: float, path: Literal["fast", "embedding"],
             cut: int | None) -> IntentVerdict:
    abstained = conf < threshold
    return IntentVerdict(label=None if abstained else nearest, nearest=nearest,
                         confidence=min(max(conf, 0.0), 1.0),
                         threshold=threshold, abstained=abstained, path=path,
                         cut_tokens=cut)
