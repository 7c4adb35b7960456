"""How good each model is per query class: a prior from the configuration, refined by feedback.

Feedback is counted per (model, class) and per (instance, class). One bad instance must not
poison its model, and must be the one that loses traffic:

- an instance is *divergent* when it has at least ``min_verdicts`` verdicts and is worse than
  its siblings (the model's other instances, pooled) by more than ``margin``, with a one-sided
  Agresti-Caffo two-proportion test at ``z`` standard errors: for one class (flag
  ``(instance, class)``), or over all its classes at once (flag ``(instance, "*")``: a drift
  shows in every class, and pooling finds it five times sooner than waiting for each class);
  the class tests share the one test's error rate (Bonferroni over the model's classes), or
  healthy instances would be flagged by chance in one of their many classes;
- the model's estimate is its prior plus the verdicts of its non-divergent instances (and
  verdicts with no instance), so a divergent instance's verdicts stop counting for the model;
- a non-divergent instance scores as its model: its siblings' verdicts are evidence about it
  too, and letting each instance's own few verdicts decide would herd a max picker onto
  whichever instance was luckiest (the empirical-Bayes estimate of the spread between
  indistinguishable instances is zero, so the shrinkage is total);
- a divergent instance's estimate is its own verdicts shrunk towards the model's estimate
  (scaled by its overall shortfall when flagged over all classes) with ``instance_strength``
  pseudo-verdicts.

Every update precomputes one immutable :class:`QualitySnapshot`; ``snapshot()`` only returns it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from statistics import NormalDist
from typing import Any

from schemas.config import ModelProfile

__all__ = ["ALL", "QualitySnapshot", "QualityTable", "diverges"]

Key = tuple[str, str]
Counts = tuple[float, float]  # (correct, wrong)
_NORMAL = NormalDist()
ALL = "*"  # the class of a divergence flag over all of an instance's classes
_ZERO: Counts = (0.0, 0.0)
_EMPTY: Mapping[Key, float] = {}


class QualitySnapshot(Mapping[Key, float]):
    """The learned estimates at one moment; as a Mapping, P(correct) per (model, class).

    Attributes:
        models: P(correct) per (model, class), robust to one bad instance (the Mapping itself).
        instances: P(correct) per (instance, class), for the divergent instances (the others
            score as their model).
        divergent: The (instance, class) pairs flagged as worse than their siblings; class
            ``"*"`` (:data:`ALL`) flags the instance over all its classes.
    """

    __slots__ = ("divergent", "instances", "models")

    def __init__(self, models: Mapping[Key, float], instances: Mapping[Key, float] = _EMPTY,
                 divergent: frozenset[Key] = frozenset()) -> None:
        self.models, self.instances, self.divergent = models, instances, divergent

    def __getitem__(self, key: Key) -> float:
        return self.models[key]

    def __iter__(self) -> Iterator[Key]:
        return iter(self.models)

    def __len__(self) -> int:
        return len(self.models)

    def get(self, key: Key, default: Any = None) -> Any:
        """Return the model-level estimate for ``key``, ``default`` when unknown."""
        return self.models.get(key, default)

    def is_divergent(self, instance: str, cls: str) -> bool:
        """Whether ``instance`` is flagged for ``cls`` or over all its classes."""
        return (instance, cls) in self.divergent or (instance, ALL) in self.divergent

    def estimate(self, instance: str, model: str, cls: str, default: float) -> float:
        """Return (instance, cls)'s estimate, else (model, cls)'s, else ``default``."""
        value = self.instances.get((instance, cls))
        return value if value is not None else self.models.get((model, cls), default)


def diverges(bad: tuple[float, float], rest: tuple[float, float], *, min_verdicts: int = 10,
             margin: float = 0.1, z: float = 2.33) -> bool:
    """Whether ``bad`` (correct, wrong) is worse than ``rest`` by more than ``margin``, significantly.

    One-sided Agresti-Caffo test (one success and one failure added to each side, which keeps
    small samples and proportions near 0 or 1 honest); both sides need ``min_verdicts``.
    """
    n1, n2 = bad[0] + bad[1], rest[0] + rest[1]
    if n1 < min_verdicts or n2 < min_verdicts:
        return False
    p1, p2 = (bad[0] + 1) / (n1 + 2), (rest[0] + 1) / (n2 + 2)
    se = math.sqrt(p1 * (1 - p1) / (n1 + 2) + p2 * (1 - p2) / (n2 + 2))
    return (p2 - p1 - margin) > z * se


class QualityTable:
    """Beta-Bernoulli estimates of P(correct answer) per (model, class) and per (instance, class).

    Args:
        profiles: Priors per model (``quality`` per class).
        prior_strength: How many observations the model prior is worth.
        default: Prior for a (model, class) the configuration does not mention.
        instance_strength: How many observations a divergent instance's shrinkage is worth.
        min_verdicts: Verdicts an instance (and its siblings) need before it can be flagged divergent.
        margin: How much worse than its siblings an instance must be to be flagged.
        z: Standard errors the shortfall beyond ``margin`` must exceed (2.33: one-sided 1%).
    """

    def __init__(self, profiles: Mapping[str, ModelProfile], prior_strength: float = 20.0, default: float = 0.5,
                 *, instance_strength: float = 10.0, min_verdicts: int = 10, margin: float = 0.1,
                 z: float = 2.33) -> None:
        self._strength, self._default, self._tau = prior_strength, default, instance_strength
        self._min, self._margin, self._z = min_verdicts, margin, z
        self._prior: dict[Key, Counts] = {}
        for model, profile in profiles.items():
            for cls, p in profile.quality.items():
                self._prior[(model, cls)] = (p * prior_strength, (1 - p) * prior_strength)
        self._direct: dict[Key, Counts] = {}  # verdicts with no instance, per (model, class)
        self._models: dict[str, _ModelCounts] = {}
        self._snap = QualitySnapshot({k: a / (a + b) for k, (a, b) in self._prior.items()})

    def update(self, model: str, cls: str, correct: bool, instance: str | None = None) -> None:
        """Fold one feedback verdict in, for ``model`` and, when known, the ``instance`` that answered.

        Cost: one pass over the model's instances (the overall test) and over those with verdicts
        for ``cls`` (the class test); every class only when the set flagged overall changes.
        """
        hit = (1.0, 0.0) if correct else (0.0, 1.0)
        mc = self._models.get(model)
        if mc is None:
            mc = self._models[model] = _ModelCounts({c for m, c in self._prior if m == model})
        mc.classes.add(cls)
        if instance is None:
            self._direct[(model, cls)] = _add(self._direct.get((model, cls), _ZERO), hit)
        else:
            counts = mc.by_cls.setdefault(cls, {})
            counts[instance] = _add(counts.get(instance, _ZERO), hit)
            mc.ctotal[cls] = _add(mc.ctotal.get(cls, _ZERO), hit)
            mc.pooled[instance] = _add(mc.pooled.get(instance, _ZERO), hit)
            mc.total = _add(mc.total, hit)
            mc.cflags[cls] = frozenset(self._flagged(counts, mc.ctotal[cls], len(mc.classes)))
        whole = self._whole(mc)
        stale = mc.classes if whole.keys() != mc.whole.keys() else {cls}
        mc.whole = whole
        self._publish(model, mc, stale)

    def forget(self, instance: str) -> bool:
        """Drop every verdict of ``instance`` (restarted, redeployed, its fault cleared): it scores as its model.

        Returns:
            Whether it had any.
        """
        found = False
        for model, mc in self._models.items():
            if instance not in mc.pooled:
                continue
            found = True
            mc.total = _sub(mc.total, mc.pooled.pop(instance))
            for cls, counts in mc.by_cls.items():
                if instance in counts:
                    mc.ctotal[cls] = _sub(mc.ctotal[cls], counts.pop(instance))
                    mc.cflags[cls] = frozenset(self._flagged(counts, mc.ctotal[cls], len(mc.classes)))
            mc.whole = self._whole(mc)
            self._publish(model, mc, mc.classes)
        return found

    def _whole(self, mc: _ModelCounts) -> dict[str, float]:
        """The instances flagged over all classes, each with its shortfall ratio."""
        return {i: _ratio(mc.pooled[i], _sub(mc.total, mc.pooled[i])) for i in self._flagged(mc.pooled, mc.total)}

    def _flagged(self, counts: Mapping[str, Counts], total: Counts, tests: int = 1) -> list[str]:
        """The instances of ``counts`` that :func:`diverges` from the rest of ``total``.

        ``tests``: how many such tests share the error rate of one (the model's classes): each is
        run at ``z`` for ``alpha / tests``.
        """
        floor = self._min
        if total[0] + total[1] < 2 * floor:
            return []
        z = self._z if tests <= 1 else _NORMAL.inv_cdf(1 - (1 - _NORMAL.cdf(self._z)) / tests)
        return [i for i, n in counts.items() if n[0] + n[1] >= floor
                and diverges(n, _sub(total, n), min_verdicts=floor, margin=self._margin, z=z)]

    def _publish(self, model: str, mc: _ModelCounts, stale: set[str]) -> None:
        """Recompute the ``stale`` classes' model estimates and the flagged instances' ones; swap the snapshot."""
        models = dict(self._snap.models)
        for c in stale:  # prior + verdicts with no instance + every instance's verdicts but the flagged ones'
            counts, out = mc.by_cls.get(c, {}), mc.cflags.get(c, frozenset()) | mc.whole.keys()
            a, b = _add(self._prior.get((model, c), (self._default * self._strength,
                                                     (1 - self._default) * self._strength)),
                        _add(self._direct.get((model, c), _ZERO), mc.ctotal.get(c, _ZERO)))
            a, b = _sub((a, b), _sum(counts[i] for i in out if i in counts))
            models[(model, c)] = a / (a + b)
        mc.entries, flags = {}, {(i, ALL) for i in mc.whole}
        for c in mc.classes:  # a flagged instance: shrunk towards the model, scaled by its overall shortfall
            counts, mean = mc.by_cls.get(c, {}), models[(model, c)]
            flags |= {(i, c) for i in mc.cflags.get(c, ())}
            for i in mc.cflags.get(c, frozenset()) | mc.whole.keys():
                s, f = counts.get(i, _ZERO)
                mc.entries[(i, c)] = (s + self._tau * mean * mc.whole.get(i, 1.0)) / (s + f + self._tau)
        mc.flags = frozenset(flags)
        instances = {k: v for m in self._models.values() for k, v in m.entries.items()}
        divergent = frozenset().union(*(m.flags for m in self._models.values()))
        self._snap = QualitySnapshot(models, instances, divergent)  # readers keep the old one

    def snapshot(self) -> QualitySnapshot:
        """Return the current estimates (immutable by convention; precomputed at the last update)."""
        return self._snap

    def get(self, model: str, cls: str | None) -> float:
        """Return the model-level mean for (model, cls), the default when unknown."""
        return self._snap.models.get((model, cls or ""), self._default)

    def instance_rows(self) -> list[dict[str, object]]:
        """Per (instance, class) with feedback: its model, verdicts, estimate and divergence flag."""
        snap, rows = self._snap, []
        for model, mc in sorted(self._models.items()):
            for cls, counts in sorted(mc.by_cls.items()):
                for inst, (s, f) in sorted(counts.items()):
                    rows.append({"instance": inst, "model": model, "class": cls, "verdicts": int(s + f),
                                 "correct": int(s), "p_correct": round(snap.estimate(inst, model, cls, 0.0), 4),
                                 "divergent": snap.is_divergent(inst, cls)})
        return rows


class _ModelCounts:
    """One model's verdicts per class and instance, pooled per instance, and its flags."""

    def __init__(self, classes: set[str]) -> None:
        self.classes = classes  # with a prior or a verdict
        self.by_cls: dict[str, dict[str, Counts]] = {}  # class -> instance -> counts
        self.ctotal: dict[str, Counts] = {}  # class -> all its instances' counts
        self.pooled: dict[str, Counts] = {}  # instance -> its counts over all classes
        self.total: Counts = _ZERO
        self.cflags: dict[str, frozenset[str]] = {}  # class -> instances flagged for it
        self.whole: dict[str, float] = {}  # instances flagged overall -> their shortfall ratio
        self.entries: dict[Key, float] = {}  # (instance, class) -> estimate, flagged instances only
        self.flags: frozenset[Key] = frozenset()


def _add(x: Counts, y: Counts) -> Counts:
    return x[0] + y[0], x[1] + y[1]


def _sub(x: Counts, y: Counts) -> Counts:
    return x[0] - y[0], x[1] - y[1]


def _ratio(bad: Counts, rest: Counts) -> float:
    """How many times as often ``bad`` is right as ``rest`` (add-one adjusted, at most 1)."""
    return min(1.0, ((bad[0] + 1) / (sum(bad) + 2)) / ((rest[0] + 1) / (sum(rest) + 2)))


def _sum(items: Iterable[Counts]) -> Counts:
    s = f = 0.0
    for a, b in items:
        s, f = s + a, f + b
    return s, f
