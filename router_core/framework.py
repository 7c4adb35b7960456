"""The plugin contracts of the router pipeline (after the Gateway API Inference Extension).

Filters judge one candidate at a time and return what it broke; scorers see the whole pool (some
terms, such as cost, are relative) and return one raw value in [0, 1] per candidate. Plugins
neither time nor trace themselves: the router does both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Protocol

from router_core.staleness import Effective
from schemas.config import ModelProfile, ScoringSettings
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import RequestFeatures, Violation

__all__ = ["Candidate", "DecisionContext", "Filter", "Scorer"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One instance under consideration: its spec, its snapshot, and the gauges to believe now."""

    spec: InstanceSpec
    state: InstanceSnapshot
    eff: Effective


@dataclass(frozen=True, slots=True)
class DecisionContext:
    """Everything a decision may depend on besides the candidates: nothing here does I/O."""

    request_id: str
    features: RequestFeatures
    intent: str | None
    now: datetime
    quality: Mapping[tuple[str, str], float]
    models: Mapping[str, ModelProfile]
    scoring: ScoringSettings


class Filter(Protocol):
    """A hard constraint on candidates.

    ``STATE_ONLY`` filters judge only the instance's spec and fresh snapshot (not the request or
    the clock); the router computes them once per snapshot (:mod:`router_core.prepared`).
    """

    TYPE: ClassVar[str]
    STATE_ONLY: ClassVar[bool]
    name: str

    def check(self, candidate: Candidate, ctx: DecisionContext) -> Violation | None:
        """Return what ``candidate`` broke (``severity="soft"``: only scales its score), or None."""
        ...


class Scorer(Protocol):
    """Computes one named score term for every candidate of the pool.

    ``STATE_ONLY`` scorers depend on one candidate's spec and fresh snapshot alone (not on the
    request, the clock or the rest of the pool) and are memoised per snapshot like filters.
    """

    TYPE: ClassVar[str]
    STATE_ONLY: ClassVar[bool]
    name: str

    def score(self, pool: Sequence[Candidate], ctx: DecisionContext) -> list[float]:
        """Return one raw value in [0, 1] per candidate, in pool order (the router clamps)."""
        ...
