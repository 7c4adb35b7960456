"""The seed's instance score, a named preset.

``score = 0.4*(1 - mem) + 0.3*(1 - queue/10) + 0.2*warmup + 0.1*(1 - error_rate)``
"""

from __future__ import annotations

from typing import ClassVar

from router_core.framework import Candidate
from schemas.config import ScoringSettings
from schemas.trace import RequestFeatures, ScoreTerm

__all__ = ["InstanceScoreScorer"]


def _clamp(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


class InstanceScoreScorer:
    """Scores an instance on free KV cache, short queue, warm-up and low error rate.

    What it does: the seed's weighted sum; each raw term is clamped to [0, 1].
    Inputs consumed: ``kv_cache_usage``, ``queue``, ``warmup_progress``, ``error_rate``. A missing
    KV or queue gauge scores 0 (pessimistic); engines that do not report warm-up count as warm,
    and an instance with no traffic yet has no errors.
    Parameters: :class:`schemas.config.ScoringSettings` (weights and ``queue_norm``).
    Category: scorer.
    """

    TYPE: ClassVar[str] = "instance-score-scorer"

    def __init__(self, settings: ScoringSettings, name: str = "seed-instance-score") -> None:
        self.name = name
        self.settings = settings

    def terms(self, candidate: Candidate, features: RequestFeatures) -> list[ScoreTerm]:
        """Return the four weighted terms."""
        s, st = self.settings, candidate.state
        raw = {
            "mem": 0.0 if st.kv_cache_usage is None else 1.0 - st.kv_cache_usage,
            "queue": 0.0 if st.queue is None else 1.0 - st.queue / s.queue_norm,
            "warmup": 1.0 if st.warmup_progress is None else st.warmup_progress,
            "error": 1.0 if st.error_rate is None else 1.0 - st.error_rate,
        }
        weights = {"mem": s.mem, "queue": s.queue, "warmup": s.warmup, "error": s.error}
        out = []
        for name, value in raw.items():
            clamped = _clamp(value)
            out.append(ScoreTerm(name=name, raw=clamped, weight=weights[name], weighted=clamped * weights[name]))
        return out
