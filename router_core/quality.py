"""How good each model is per query class: a prior from the configuration, refined by feedback.

Feedback is counted per (model, class) and per (instance, class). One bad instance must not
poison its model, and must be the one that loses traffic:

- an instance is *divergent* for a class when it has at least ``min_verdicts`` verdicts and is
  worse than its siblings (the model's other instances, pooled) by more than ``margin``, with
  a one-sided Agresti-Caffo two-proportion test at ``z`` standard errors;
- the model's estimate is its prior plus the verdicts of its non-divergent instances (and
  verdicts with no instance), so a divergent instance's verdicts stop counting for the model;
- an instance's estimate is its own verdicts shrunk towards the model's estimate with
  ``instance_strength`` pseudo-verdicts, so a new or rarely-fed instance scores like its model.

Every update precomputes one immutable :class:`QualitySnapshot`; ``snapshot()`` only returns it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from schemas.config import ModelProfile

__all__ = ["QualitySnapshot", "QualityTable", "diverges"]

Key = tuple[str, str]
_EMPTY: Mapping[Key, float] = {}


class QualitySnapshot(Mapping[Key, float]):
    """The learned estimates at one moment; as a Mapping, P(correct) per (model, class).

    Attributes:
        models: P(correct) per (model, class), robust to one bad instance (the Mapping itself).
        instances: P(correct) per (instance, class), for instances with feedback.
        divergent: The (instance, class) pairs flagged as worse than their siblings.
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
        instance_strength: How many observations an instance's shrinkage towards its model is worth.
        min_verdicts: Verdicts an instance (and its siblings) need before it can be flagged divergent.
        margin: How much worse than its siblings an instance must be to be flagged.
        z: Standard errors the shortfall beyond ``margin`` must exceed (2.33: one-sided 1%).
    """

    def __init__(self, profiles: Mapping[str, ModelProfile], prior_strength: float = 20.0, default: float = 0.5,
                 *, instance_strength: float = 10.0, min_verdicts: int = 10, margin: float = 0.1,
                 z: float = 2.33) -> None:
        self._strength, self._default, self._inst_strength = prior_strength, default, instance_strength
        self._min, self._margin, self._z = min_verdicts, margin, z
        self._prior: dict[Key, tuple[float, float]] = {}
        for model, profile in profiles.items():
            for cls, p in profile.quality.items():
                self._prior[(model, cls)] = (p * prior_strength, (1 - p) * prior_strength)
        self._direct: dict[Key, tuple[float, float]] = {}  # verdicts with no instance, per (model, class)
        self._inst: dict[Key, dict[str, tuple[float, float]]] = {}  # (model, class) -> instance -> counts
        self._snap = QualitySnapshot({k: a / (a + b) for k, (a, b) in self._prior.items()})

    def update(self, model: str, cls: str, correct: bool, instance: str | None = None) -> None:
        """Fold one feedback verdict in, for ``model`` and, when known, the ``instance`` that answered."""
        key, hit = (model, cls), (1.0, 0.0) if correct else (0.0, 1.0)
        if instance is None:
            self._direct[key] = _add(self._direct.get(key, (0.0, 0.0)), hit)
        else:
            counts = self._inst.setdefault(key, {})
            counts[instance] = _add(counts.get(instance, (0.0, 0.0)), hit)
        self._refresh(key)

    def _refresh(self, key: Key) -> None:
        """Recompute ``key``'s model estimate, its instances' estimates and flags; swap the snapshot."""
        model, cls = key
        counts = self._inst.get(key, {})
        total = _sum(counts.values())
        flagged = {i for i, c in counts.items()
                   if diverges(c, _sub(total, c), min_verdicts=self._min, margin=self._margin, z=self._z)}
        a, b = self._prior.get(key, (self._default * self._strength, (1 - self._default) * self._strength))
        kept = _sum(c for i, c in counts.items() if i not in flagged)
        a, b = _add((a, b), _add(self._direct.get(key, (0.0, 0.0)), kept))
        mean, tau = a / (a + b), self._inst_strength
        old = self._snap
        instances = {**old.instances, **{(i, cls): (s + tau * mean) / (s + f + tau) for i, (s, f) in counts.items()}}
        kept_flags = {k for k in old.divergent if k[1] != cls or k[0] not in counts}
        divergent = frozenset(kept_flags | {(i, cls) for i in flagged})
        self._snap = QualitySnapshot({**old.models, key: mean}, instances, divergent)  # readers keep the old one

    def snapshot(self) -> QualitySnapshot:
        """Return the current estimates (immutable by convention; precomputed at the last update)."""
        return self._snap

    def get(self, model: str, cls: str | None) -> float:
        """Return the model-level mean for (model, cls), the default when unknown."""
        return self._snap.models.get((model, cls or ""), self._default)

    def instance_rows(self) -> list[dict[str, object]]:
        """Per (instance, class) with feedback: its model, verdicts, estimate and divergence flag."""
        snap, rows = self._snap, []
        for (model, cls), counts in sorted(self._inst.items()):
            for inst, (s, f) in sorted(counts.items()):
                rows.append({"instance": inst, "model": model, "class": cls, "verdicts": int(s + f),
                             "correct": int(s), "p_correct": round(snap.instances[(inst, cls)], 4),
                             "divergent": (inst, cls) in snap.divergent})
        return rows


def _add(x: tuple[float, float], y: tuple[float, float]) -> tuple[float, float]:
    return x[0] + y[0], x[1] + y[1]


def _sub(x: tuple[float, float], y: tuple[float, float]) -> tuple[float, float]:
    return x[0] - y[0], x[1] - y[1]


def _sum(items: Any) -> tuple[float, float]:
    s = f = 0.0
    for a, b in items:
        s, f = s + a, f + b
    return s, f
