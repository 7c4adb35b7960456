"""How good each model is per query class: a prior from the configuration, refined by feedback."""

from __future__ import annotations

from collections.abc import Mapping

from schemas.config import ModelProfile

__all__ = ["QualityTable"]


class QualityTable:
    """Beta-Bernoulli estimate of P(correct answer) per (model, class).

    Args:
        profiles: Priors per model (``quality`` per class).
        prior_strength: How many observations the prior is worth.
        default: Prior for a (model, class) the configuration does not mention.
    """

    def __init__(self, profiles: Mapping[str, ModelProfile], prior_strength: float = 20.0, default: float = 0.5):
        self._counts: dict[tuple[str, str], tuple[float, float]] = {}
        self._strength = prior_strength
        self._default = default
        for model, profile in profiles.items():
            for cls, p in profile.quality.items():
                self._counts[(model, cls)] = (p * prior_strength, (1 - p) * prior_strength)
        self._means = {k: a / (a + b) for k, (a, b) in self._counts.items()}

    def update(self, model: str, cls: str, correct: bool) -> None:
        """Fold one feedback verdict in."""
        a, b = self._counts.get((model, cls), (self._default * self._strength, (1 - self._default) * self._strength))
        a, b = (a + 1, b) if correct else (a, b + 1)
        self._counts[(model, cls)] = (a, b)
        self._means = {**self._means, (model, cls): a / (a + b)}  # readers keep a consistent old dict

    def snapshot(self) -> Mapping[tuple[str, str], float]:
        """Return the current means (an immutable-by-convention mapping)."""
        return self._means

    def get(self, model: str, cls: str | None) -> float:
        """Return the mean for (model, cls), the default when unknown."""
        return self._means.get((model, cls or ""), self._default)
