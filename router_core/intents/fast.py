"""The fast path: character n-gram TF-IDF and a linear model (scikit-learn), sub-millisecond per query.

Character n-grams (1-4, within word boundaries) need no tokenizer and work for Chinese, where the
MiniLM embedding separates classes poorly. Confidence is the linear model's top class probability.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from sklearn.feature_extraction.text import TfidfVectorizer  # type: ignore[import-untyped]
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

__all__ = ["FastModel", "GramRow", "tfidf_row"]

GramRow = tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]  # a text's TF-IDF row: its columns and values


def tfidf_row(analyse: Callable[[str], list[str]], vocab: dict[str, int], idf: npt.NDArray[np.float64],
              text: str) -> GramRow:
    """``text``'s sublinear TF-IDF row (1 + log count, times IDF, L2-normalised) over a fitted vocabulary.

    What scikit-learn's ``transform`` computes for one text, without its per-call validation and
    sparse-matrix building. No columns: no known n-gram.
    """
    counts: dict[int, int] = {}
    for gram in analyse(text):
        j = vocab.get(gram)
        if j is not None:
            counts[j] = counts.get(j, 0) + 1
    cols = np.fromiter(counts, dtype=np.intp, count=len(counts))
    vals = (1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))) * idf[cols]
    if len(cols):
        vals /= np.sqrt(vals @ vals)
    return cols, vals


class FastModel:
    """TF-IDF over character n-grams + multinomial logistic regression.

    Args:
        seed: Seeds the solver (lbfgs is deterministic; the seed is kept for other solvers).
        c: Inverse regularisation strength.
    """

    def __init__(self, seed: int = 0, c: float = 20.0) -> None:
        self.seed = seed
        self.c = c
        self._vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), sublinear_tf=True, lowercase=True,
                                    dtype=np.float32)
        self._clf = LogisticRegression(C=c, max_iter=2000, random_state=seed)
        self.labels: list[str] = []

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> FastModel:
        """Fit on ``texts`` labelled ``labels`` (at least two routes); returns self."""
        x = self._vec.fit_transform(list(texts))
        self._clf.fit(x, list(labels))
        self.labels = [str(c) for c in self._clf.classes_]
        # The request path scores one text: the fitted model's arithmetic, without scikit-learn's
        # per-call validation and sparse-matrix building (about 10x less time, same probabilities).
        self._analyse = self._vec.build_analyzer()
        self._vocab: dict[str, int] = self._vec.vocabulary_
        self._idf = self._vec.idf_.astype(np.float64)
        self._coef = np.ascontiguousarray(self._clf.coef_.T, dtype=np.float64)  # features x classes
        self._intercept = self._clf.intercept_.astype(np.float64)
        return self

    def score(self, texts: Sequence[str]) -> tuple[list[str], list[float]]:
        """Return the most probable route and its probability per text."""
        if len(texts) == 1:
            label, p = self.score_one(texts[0])
            return [label], [p]
        proba = self._clf.predict_proba(self._vec.transform(list(texts)))
        best = proba.argmax(axis=1)
        return [self.labels[i] for i in best], [float(proba[r, i]) for r, i in enumerate(best)]

    @property
    def vocabulary(self) -> dict[str, int]:
        """The fitted n-gram columns (models fitted on the same texts have the same: they can share a gram row)."""
        return self._vocab

    def gram_row(self, text: str) -> GramRow:
        """``text``'s TF-IDF row over the fitted n-grams (:func:`tfidf_row`)."""
        return tfidf_row(self._analyse, self._vocab, self._idf, text)

    def score_one(self, text: str, grams: GramRow | None = None) -> tuple[str, float]:
        """The most probable route of one text and its probability, as ``predict_proba`` computes them.

        Sublinear TF (1 + log count) times IDF, L2-normalised, then the linear model: a softmax over
        the classes (multinomial), or the logistic of the one decision value for two routes.
        ``grams``: the text's :meth:`gram_row` (None: computed here).
        """
        cols, vals = self.gram_row(text) if grams is None else grams
        if len(cols):
            z = vals @ self._coef[cols] + self._intercept
        else:
            z = self._intercept.copy()
        if z.shape[0] == 1:  # two routes: one decision value for the second class
            p1 = 1.0 / (1.0 + np.exp(-z[0]))
            proba = np.array([1.0 - p1, p1])
        else:
            e = np.exp(z - z.max())
            proba = e / e.sum()
        best = int(proba.argmax())
        return self.labels[best], float(proba[best])


def fit_fast(seed: int) -> FastModelFactory:
    """A ``fit(texts, labels)`` callable for :func:`calibrated_threshold`."""
    return FastModelFactory(seed)


class FastModelFactory:
    """Callable that fits a fresh :class:`FastModel` (picklable, seeded)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __call__(self, texts: list[str], labels: list[str]) -> FastModel:
        """Fit and return a model."""
        return FastModel(self.seed).fit(texts, labels)
