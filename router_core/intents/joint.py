"""The slow path's model: one linear model over the sentence embedding and character n-grams together.

Why not the seed's nearest K-means centroid (seed 003 §2.2): with a handful of examples per route a
centroid is the average of a few points and says nothing about which directions separate the
routes; a multinomial logistic regression learns them, and the character n-grams (TF-IDF, within
word boundaries) add the surface cues an English-centric encoder misses (Chinese, product names,
codes). Measured on held-out label subsets of BANKING77 and on the Home Assistant sets
(``docs/policies.md``, Intents), it beats the centroids or ties, and beats either feature set alone.

MiniLM is English-centric: its vocabulary splits Chinese into single characters, and on a Chinese
route set its embedding alone is little better than chance. Each text's embedding therefore enters
the model scaled by ``1 - 0.5 x`` its share of CJK characters among its letters (:func:`embedding_weight`),
so the n-grams carry Chinese text (on the Chinese Home Assistant set, 8 examples a route: 88.4% with
the embedding at full weight, 91.2% at half, 90.9% without it).

A linear model cannot carve a route that is a union of scattered topics (a domain such as
"travel" spans bookings, visas and lost luggage): on BANKING77 routes made of 5-9 intents each it
picks 42-70% right where the nearest example alone picks 48-81%. So each route's logit also gets
``neighbour_weight x`` the cosine of the query to that route's nearest example, weighted by the
query's non-CJK share (MiniLM's neighbours are noise on Chinese). The weight is chosen per route set
on held-out folds of its own examples (:func:`choose_neighbour_weight`): 0 where the routes are
single topics and the linear model is best, up to 30 where they are unions.

The confidence is the model's top probability times the cosine of the query to the nearest example
of that route: a query far from every example (out of scope, gibberish) has a low cosine even when
the linear model, which only ever compares routes, is sure of its pick.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp  # type: ignore[import-untyped]
from sklearn.feature_extraction.text import TfidfVectorizer  # type: ignore[import-untyped]
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

from router_core.intents.fast import GramRow, tfidf_row

__all__ = ["NEIGHBOUR_WEIGHTS", "JointModel", "JointScore", "choose_neighbour_weight", "embedding_weight"]

Vectors = npt.NDArray[np.float32]
JointScore = tuple[str, float, float, float]  # (route, confidence, probability, cosine to its nearest example)
NEIGHBOUR_WEIGHTS = (0.0, 5.0, 10.0, 15.0, 20.0, 30.0)  # the candidates choose_neighbour_weight tries


def embedding_weight(text: str) -> float:
    """``1 - 0.5 x`` the share of CJK ideographs among ``text``'s ideographs and ASCII letters (1.0 for neither)."""
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf")
    if not cjk:
        return 1.0
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return 1.0 - 0.5 * cjk / (cjk + latin)


class JointModel:
    """Logistic regression over ``[embedding, char n-gram TF-IDF]``; nearest-example cosine per route.

    Args:
        seed: Seeds the solver.
        c: Inverse regularisation strength.
        neighbour_weight: Weight of each route's nearest-example cosine in its logit (scoring only).
    """

    def __init__(self, seed: int = 0, c: float = 10.0, neighbour_weight: float = 0.0) -> None:
        self.seed = seed
        self.c = c
        self.neighbour_weight = neighbour_weight
        self._vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), sublinear_tf=True, lowercase=True,
                                    dtype=np.float32)
        self.labels: list[str] = []

    def fit(self, texts: Sequence[str], vectors: Vectors, labels: Sequence[str]) -> JointModel:
        """Fit on ``texts`` with their embedding rows ``vectors``, labelled ``labels`` (two routes or more)."""
        grams = self._vec.fit_transform(list(texts))
        weights = np.array([embedding_weight(t) for t in texts], dtype=np.float32)[:, None]
        x = sp.hstack([sp.csr_matrix(vectors * weights), grams]).tocsr()
        clf = LogisticRegression(C=self.c, max_iter=3000, random_state=self.seed).fit(x, list(labels))
        self.labels = [str(c) for c in clf.classes_]
        dim = vectors.shape[1]
        coef = np.asarray(clf.coef_, dtype=np.float64)
        intercept = np.asarray(clf.intercept_, dtype=np.float64)
        if coef.shape[0] == 1:  # two routes: sklearn keeps one row for the second class; make it a softmax pair
            coef = np.vstack([-coef / 2, coef / 2])
            intercept = np.array([-intercept[0] / 2, intercept[0] / 2])
        self._w_emb = np.ascontiguousarray(coef[:, :dim].T)  # dim x classes
        self._w_gram = np.ascontiguousarray(coef[:, dim:].T)  # grams x classes
        self._intercept = intercept
        self._analyse = self._vec.build_analyzer()
        self._vocab: dict[str, int] = self._vec.vocabulary_
        self._idf = self._vec.idf_.astype(np.float64)
        index = {name: i for i, name in enumerate(self.labels)}
        owner = np.array([index[str(lab)] for lab in labels])
        order = np.argsort(owner, kind="stable")  # rows by route, so each route's maximum is one reduceat
        self._examples = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32)[order])
        self._owner = owner[order]
        self._starts = np.searchsorted(self._owner, np.arange(len(self.labels)))
        return self

    @property
    def vocabulary(self) -> dict[str, int]:
        """The fitted n-gram columns (models fitted on the same texts have the same: they can share a gram row)."""
        return self._vocab

    def gram_row(self, text: str) -> GramRow:
        """``text``'s TF-IDF row over the fitted n-grams (:func:`~router_core.intents.fast.tfidf_row`)."""
        return tfidf_row(self._analyse, self._vocab, self._idf, text)

    def _gram_logits(self, text: str, grams: GramRow | None) -> npt.NDArray[np.float64]:
        cols, vals = self.gram_row(text) if grams is None else grams
        if not len(cols):
            return np.zeros(len(self.labels))
        return np.asarray(vals @ self._w_gram[cols])

    def parts(self, text: str, vector: Vectors) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Per route: the linear model's logit, and the nearest-example cosine as it enters the logit.

        The cosine is weighted by the text's non-CJK share (``2 x embedding_weight - 1``); the logit
        :meth:`score_one` takes is ``linear + neighbour_weight x neighbour``.
        """
        linear, nearest, w = self._parts(text, vector, None)
        return linear, (2.0 * w - 1.0) * nearest

    def _parts(self, text: str, vector: Vectors, grams: GramRow | None,
               ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
        v = np.asarray(vector, dtype=np.float32).reshape(-1)
        w = embedding_weight(text)
        linear = w * (v.astype(np.float64) @ self._w_emb) + self._gram_logits(text, grams) + self._intercept
        nearest = np.maximum.reduceat(self._examples @ v, self._starts).astype(np.float64)
        return linear, nearest, w

    def score_one(self, text: str, vector: Vectors, grams: GramRow | None = None) -> JointScore:
        """Route, confidence (probability x nearest-example cosine), probability and cosine for one query.

        ``grams``: the text's :meth:`gram_row` from a model with the same :attr:`vocabulary` (None: computed here).
        """
        linear, nearest, w = self._parts(text, vector, grams)
        z = linear + (self.neighbour_weight * (2.0 * w - 1.0)) * nearest
        e = np.exp(z - z.max())
        proba = e / e.sum()
        best = int(proba.argmax())
        cos = float(np.clip(nearest[best], 0.0, 1.0))
        p = float(proba[best])
        return self.labels[best], p * cos, p, cos

    def examples_of(self, route: str) -> Vectors:
        """The embedding rows of ``route``'s training examples."""
        rows: Vectors = self._examples[self._owner == self.labels.index(route)]
        return rows

    def score(self, texts: Sequence[str], vectors: Vectors) -> tuple[list[str], list[float]]:
        """``(route, confidence)`` per text (the calibration's :class:`~router_core.intents.calibrate.Scorer`)."""
        out = [self.score_one(t, v) for t, v in zip(texts, vectors, strict=True)]
        return [o[0] for o in out], [o[1] for o in out]


def choose_neighbour_weight(held_out: Sequence[tuple[JointModel, str, Vectors, str]]) -> float:
    """The weight of :data:`NEIGHBOUR_WEIGHTS` under which the most held-out examples are picked right.

    ``held_out``: ``(fold's model, text, its embedding, its route)`` for every held-out example. Ties
    go to the smaller weight (0: the linear model alone).
    """
    right = dict.fromkeys(NEIGHBOUR_WEIGHTS, 0)
    for model, text, vector, route in held_out:
        if route not in model.labels:
            continue
        linear, neighbour = model.parts(text, vector)
        gold = model.labels.index(route)
        for weight in NEIGHBOUR_WEIGHTS:
            right[weight] += int((linear + weight * neighbour).argmax()) == gold
    return max(NEIGHBOUR_WEIGHTS, key=lambda w: (right[w], -w))
