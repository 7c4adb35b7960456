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

__all__ = ["JointModel", "JointScore", "embedding_weight"]

Vectors = npt.NDArray[np.float32]
JointScore = tuple[str, float, float, float]  # (route, confidence, probability, cosine to its nearest example)


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
    """

    def __init__(self, seed: int = 0, c: float = 10.0) -> None:
        self.seed = seed
        self.c = c
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
        self._examples = np.asarray(vectors, dtype=np.float32)
        self._owner = np.array([index[str(lab)] for lab in labels])
        return self

    def _gram_logits(self, text: str) -> npt.NDArray[np.float64]:
        counts: dict[int, int] = {}
        for gram in self._analyse(text):
            j = self._vocab.get(gram)
            if j is not None:
                counts[j] = counts.get(j, 0) + 1
        if not counts:
            return np.zeros(len(self.labels))
        cols = np.fromiter(counts, dtype=np.intp, count=len(counts))
        vals = (1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))) * self._idf[cols]
        vals /= np.sqrt(vals @ vals)
        return np.asarray(vals @ self._w_gram[cols])

    def score_one(self, text: str, vector: Vectors) -> JointScore:
        """Route, confidence (probability x nearest-example cosine), probability and cosine for one query."""
        v = np.asarray(vector, dtype=np.float64).reshape(-1)
        z = embedding_weight(text) * (v @ self._w_emb) + self._gram_logits(text) + self._intercept
        e = np.exp(z - z.max())
        proba = e / e.sum()
        best = int(proba.argmax())
        sims = self._examples[self._owner == best] @ v.astype(np.float32)
        cos = float(np.clip(sims.max(), 0.0, 1.0))
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
