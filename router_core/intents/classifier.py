"""IntentClassifier: the router's semantic-intent call, fast path first, the joint model for the rest.

``classify(text)`` cuts the text at ``max_tokens`` and runs the fast path (character n-gram TF-IDF
and logistic regression, well under a millisecond). Its verdict stands when its confidence reaches
the fast path's *accept* threshold, calibrated so that held-out verdicts above it are right at least
``fast_precision`` of the time and no background text (:mod:`router_core.intents.background`)
reaches it. Every other query takes the slow path: MiniLM's embedding and the character n-grams
in one linear model, with each route's nearest example as much as held-out folds say helps
(:mod:`router_core.intents.joint`). It first reads the query with MiniLM's first layers only
(``early_exit_layers``), and a verdict the calibration says the whole model would not better
stands there (``path="early"``, :mod:`router_core.intents.early`); the rest go on through the
remaining layers (``path="embedding"``), where the model abstains (``label`` None, ``nearest``
kept; the rule layer decides) below its calibrated threshold, or when the query lies nearer to a
background text than to any example of the route it picked.

The thresholds are calibrated per route set on held-out folds of the examples
(:meth:`IntentClassifier.fit_embedding`, with :mod:`router_core.intents.set_calibration`'s methods);
:attr:`IntentClassifier.calibration` holds the figures.
Without torch, transformers or the model package the classifier runs the fast path only, which
then abstains below its own held-out quantile, and :attr:`embedding_status` says why.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Literal

import numpy as np

from router_core.intents.background import (
    background_texts,
    covers_small_talk_zh,
    gibberish,
    is_gibberish,
    is_small_talk_zh,
    is_wordless,
    uncovered,
)
from router_core.intents.cache import CacheEntry, CentroidCache, cache_path_for
from router_core.intents.calibrate import calibrated_threshold
from router_core.intents.cut import cut_to_tokens
from router_core.intents.early import EarlyExit
from router_core.intents.embedding import Embedder, Vectors, cluster_route, embedder_missing, k_for
from router_core.intents.fast import FastModel, fit_fast
from router_core.intents.joint import JointModel
from router_core.intents.minilm import MODEL_NAME, MiniLMEncoder
from router_core.intents.routes import MIN_EXAMPLES, load_routes, route_hash, too_few
from router_core.intents.set_calibration import SetCalibration
from schemas.config.intents import IntentSettings
from schemas.errors import ConfigError
from schemas.trace_policy import IntentVerdict

__all__ = ["IntentClassifier"]

_COVER = 0.7  # a background text this close (cosine) to a route example is what the route set is about
_CALIBRATION = "joint-11"  # bump when the calibration changes: cached figures of another version are not reused


class IntentClassifier(SetCalibration):
    """Classify query text into one of the routes, or abstain.

    Args:
        routes: Route name -> example utterances (at least two routes).
        settings: Thresholds, calibration, cut bound, seed.
        cache_path: The embedding cache (None: no cache file).
        embedder: The embedding model (None: MiniLM at ``settings.embedding_precision`` when installed, else
            the fast path only).
    """

    def __init__(self, routes: dict[str, list[str]], settings: IntentSettings, *, cache_path: Path | None = None,
                 embedder: Embedder | None = None) -> None:
        if len(routes) < 2:
            raise ConfigError(settings.routes, [(None, "routes", "at least two routes are needed")], what="routes file")
        few: list[tuple[int | None, str, str]] = [(None, r, too_few(len(ts))) for r, ts in routes.items()
                                                  if len(ts) < MIN_EXAMPLES]
        if few:
            raise ConfigError(settings.routes, few, what="routes file")
        self.routes = routes
        self.settings = settings
        self.cache_path = cache_path
        self.embedding_status = None if embedder is not None else embedder_missing()
        if embedder is None and self.embedding_status is None:
            embedder = MiniLMEncoder(settings.embedding_precision, max_seq_length=settings.embedding_max_tokens,
                                     early_layers=settings.early_exit_layers)
        self._embedder = embedder
        # An early exit needs an encoder that can stop after its first layers (MiniLMEncoder(early_layers=K)).
        self._early_layers = int(getattr(embedder, "early_layers", 0) or 0)
        # The cache's model key: vectors of another model or precision are never mixed with these.
        self.model_id: str = getattr(embedder, "model_id", MODEL_NAME)
        self._texts = [t for ts in routes.values() for t in ts]
        self._labels = [r for r, ts in routes.items() for _ in ts]
        self._fast = FastModel(settings.seed).fit(self._texts, self._labels)
        # Fast path alone: abstain below the held-out quantile. With the slow path, fit_embedding sets the
        # accept threshold (until then every query takes the slow path, which fits first).
        self.fast_threshold = 1.0
        if not self._slow(None):
            self.fast_threshold = self._threshold(settings.fast_threshold, lambda: calibrated_threshold(
                self._texts, self._labels, fit_fast(settings.seed), folds=settings.folds,
                quantile=settings.calibration_quantile, seed=settings.seed))
        self._joint: JointModel | None = None
        self._exit: EarlyExit | None = None
        self._shared_grams = False  # the fast and joint models read the same n-grams: classify computes them once
        self._background: Vectors | None = None
        self._small_talk_zh = False  # the Chinese small-talk list abstains (set by the fit: the guard on, not covered)
        self._vocabulary: frozenset[str] = frozenset()
        self.embedding_threshold: float | None = None
        self._slow_threshold = 0.0
        self.calibration: dict[str, float] = {}
        self.reclustered: list[str] = []
        self._lock = threading.RLock()  # fit_embedding checks itself through classify

    @classmethod
    def from_settings(cls, settings: IntentSettings, base_dir: str | Path = ".",
                      embedder: Embedder | None = None) -> IntentClassifier:
        """Load the routes file (relative to ``base_dir``) with its cache beside it."""
        path = Path(base_dir) / settings.routes
        return cls(load_routes(path), settings, cache_path=cache_path_for(path), embedder=embedder)

    @property
    def has_embedding(self) -> bool:
        """Whether the slow path can run."""
        return self._embedder is not None

    @property
    def early_threshold(self) -> float | None:
        """The early exit's calibrated threshold; None when there is none (off, not fitted, or never worth it)."""
        return None if self._exit is None else self._exit.threshold

    @property
    def is_fitted(self) -> bool:
        """Whether the slow path is fitted (:meth:`fit_embedding` ran)."""
        return self.embedding_threshold is not None

    def _slow(self, escalate: bool | None) -> bool:
        return self._embedder is not None and (self.settings.escalate if escalate is None else escalate)

    def _set_hash(self) -> str:
        s = self.settings
        key = [[r, route_hash(ts)] for r, ts in self.routes.items()] + [
            _CALIBRATION, s.fast_threshold, s.embedding_threshold, s.fast_precision, s.fast_unseen_share, s.folds,
            s.calibration_quantile, s.seed, self._early_layers]
        return hashlib.sha256(repr(key).encode()).hexdigest()[:16]

    def _embed_routes(self, cache: CentroidCache) -> dict[str, CacheEntry]:
        assert self._embedder is not None
        s = self.settings
        fresh: dict[str, CacheEntry] = {}
        self.reclustered = []
        for route, texts in self.routes.items():
            h = route_hash(texts)
            entry = cache.routes.get(route)
            if entry is None or entry.hash != h or (self._early_layers and entry.early is None):
                early, vectors = self._embed(texts)
                k = k_for(len(texts), s.k_min, s.k_max, s.examples_per_centroid)
                entry = CacheEntry(h, vectors, cluster_route(vectors, k, s.seed), early)
                self.reclustered.append(route)
            fresh[route] = entry
        return fresh

    def _embed(self, texts: list[str]) -> tuple[Vectors | None, Vectors]:
        """The texts' rows after the early exit's layers (None without one) and their final rows."""
        assert self._embedder is not None
        if self._early_layers:
            early, final = self._embedder.embed_both(texts)  # type: ignore[attr-defined]
            return np.asarray(early, dtype=np.float32), np.asarray(final, dtype=np.float32)
        return None, np.asarray(self._embedder.embed(texts), dtype=np.float32)

    def fit_embedding(self) -> None:
        """Embed the routes whose cache entry is stale, fit the joint model, calibrate, save the cache."""
        with self._lock:
            if self._joint is not None or self._embedder is None:
                return
            path = self.cache_path
            cache = CentroidCache.load(path, self.model_id) if path is not None else CentroidCache(self.model_id)
            fresh = self._embed_routes(cache)
            vectors = np.concatenate([e.embeddings for e in fresh.values()]).astype(np.float32)
            rows = None if not self._early_layers else np.concatenate(
                [e.early for e in fresh.values() if e.early is not None]).astype(np.float32)
            vocabulary = getattr(self._embedder, "vocabulary", None)
            self._vocabulary = frozenset(vocabulary()) if callable(vocabulary) else frozenset()
            bg_rows, background = self._embed(background_texts(self.settings.seed))
            keep = uncovered(background, vectors, _COVER)
            self._background = background[keep]
            set_hash = self._set_hash()
            figures = {k: v for k, v in cache.thresholds.items() if k == set_hash}
            if set_hash not in figures:
                figures[set_hash] = self._calibrate(vectors, rows, None if bg_rows is None else bg_rows[keep])
            calibration = dict(figures[set_hash])
            guard = bool(calibration.get("background_guard", 1.0))
            if not guard:
                self._background = None
            self._small_talk_zh = guard and not covers_small_talk_zh(self._texts)
            seed = self.settings.seed
            self._joint = JointModel(seed, neighbour_weight=calibration["neighbour_weight"]).fit(
                self._texts, vectors, self._labels)
            if rows is not None and bg_rows is not None and calibration.get("early_threshold", 1.0) < 1.0:
                early = JointModel(seed, neighbour_weight=calibration["early_neighbour_weight"]).fit(
                    self._texts, rows, self._labels)
                self._exit = EarlyExit(early, calibration["early_threshold"], bg_rows[keep] if guard else None)
            # Fitted on the same texts with the same n-gram settings, the models have one vocabulary.
            self._shared_grams = self._fast.vocabulary == self._joint.vocabulary and (
                self._exit is None or self._exit.model.vocabulary == self._joint.vocabulary)
            self._slow_threshold = calibration["embedding_threshold"]
            self.fast_threshold = calibration["fast_threshold"]
            calibration.update(self._gibberish_check())
            self.calibration = calibration
            # Last: the gateway's fast path and its policy book read it as "fitted" (their figures are final).
            self.embedding_threshold = calibration["embedding_threshold"]
            if path is not None and (self.reclustered or figures != cache.thresholds
                                     or list(fresh) != list(cache.routes)):
                CentroidCache(self.model_id, fresh, figures).save(path)

    def _gibberish_check(self) -> dict[str, float]:
        probe = gibberish(50, self.settings.seed + 2)
        abstained = sum(self.classify(t).abstained for t in probe)
        return {"gibberish_abstained": round(abstained / len(probe), 4)}

    def fast_verdict(self, text: str) -> IntentVerdict | None:
        """The fast path's verdict, or None when the query needs the slow path (never blocks on the model)."""
        text, cut = cut_to_tokens(text, self.settings.max_tokens)
        nearest, conf = self._fast.score_one(text)
        fitted = self.embedding_threshold is not None
        if is_wordless(text) or (fitted and self._background_text(text)):
            return _abstain(nearest, self.fast_threshold, cut)
        if conf >= self.fast_threshold and (fitted or self._embedder is None or not self.settings.escalate):
            return _verdict(nearest, conf, self.fast_threshold, "fast", cut)
        if self._slow(None):
            return None
        return _verdict(nearest, conf, self.fast_threshold, "fast", cut)

    def classify(self, text: str, *, escalate: bool | None = None) -> IntentVerdict:
        """Return the verdict for ``text`` (never stored: only the label, scores and the cut are).

        Args:
            text: The query text.
            escalate: Override the settings' ``escalate`` for this call (False: the fast path only).
        """
        text, cut = cut_to_tokens(text, self.settings.max_tokens)
        grams = self._fast.gram_row(text)
        nearest, conf = self._fast.score_one(text, grams)
        if is_wordless(text):  # no letter or digit: nothing any route can claim
            return _abstain(nearest, self.fast_threshold, cut)
        if not self._slow(escalate):
            return _verdict(nearest, conf, self.fast_threshold, "fast", cut)
        self.fit_embedding()
        if self._background_text(text):  # no word the encoder knows, or Chinese small talk: abstain at once
            return _abstain(nearest, self.fast_threshold, cut)
        if conf >= self.fast_threshold:
            return _verdict(nearest, conf, self.fast_threshold, "fast", cut)
        assert self._embedder is not None and self._joint is not None
        shared = grams if self._shared_grams else None
        if self._exit is not None:
            row, state = self._embedder.embed_early(text)  # type: ignore[attr-defined]
            settled = self._exit.verdict(text, row, shared)
            if settled is not None:
                return _verdict(settled[0], settled[1], self._exit.threshold, "early", cut)
            vec = self._embedder.finish(state)  # type: ignore[attr-defined]
        else:
            vec = np.asarray(self._embedder.embed([text]), dtype=np.float32)[0]
        name, joint_conf, _, _ = self._joint.score_one(text, vec, shared)
        verdict = _verdict(name, joint_conf, self._slow_threshold, "embedding", cut)
        if verdict.label is not None and self._guarded(text, vec, self._background, self._joint.examples_of(name)):
            return verdict.model_copy(update={"label": None, "abstained": True})
        return verdict

    def _background_text(self, text: str) -> bool:
        """Whether ``text`` abstains at once once fitted: gibberish, or Chinese small talk the set does not cover."""
        return is_gibberish(text, self._vocabulary) or (self._small_talk_zh and is_small_talk_zh(text))


def _abstain(nearest: str, threshold: float, cut: int | None) -> IntentVerdict:
    """The fast path's abstention at confidence 0 (whatever the threshold: it may be 0 on a degenerate set)."""
    return IntentVerdict(label=None, nearest=nearest, confidence=0.0, threshold=threshold, abstained=True,
                         path="fast", cut_tokens=cut)


def _verdict(nearest: str, conf: float, threshold: float, path: Literal["fast", "early", "embedding"],
             cut: int | None) -> IntentVerdict:
    abstained = conf < threshold
    return IntentVerdict(label=None if abstained else nearest, nearest=nearest,
                         confidence=min(max(conf, 0.0), 1.0),
                         threshold=threshold, abstained=abstained, path=path,
                         cut_tokens=cut)
