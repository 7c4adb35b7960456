"""The plugin contracts of the router pipeline (after the Gateway API Inference Extension).

A filter returns the violations it finds on one candidate (none means it passes); a scorer
returns its weighted terms. Plugins neither time nor trace themselves: the router does both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import RequestFeatures, ScoreTerm, Violation

__all__ = ["Candidate", "Filter", "Scorer"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One instance under consideration, with its state at decision time."""

    spec: InstanceSpec
    state: InstanceSnapshot


class Filter(Protocol):
    """A hard constraint on candidates."""

    TYPE: ClassVar[str]
    name: str

    def check(self, candidate: Candidate, features: RequestFeatures) -> Violation | None:
        """Return the violation, or None when ``candidate`` satisfies the constraint."""
        ...


class Scorer(Protocol):
    """Scores feasible candidates; each term is in [0, 1] before its weight."""

    TYPE: ClassVar[str]
    name: str

    def terms(self, candidate: Candidate, features: RequestFeatures) -> list[ScoreTerm]:
        """Return the weighted terms of ``candidate``'s score."""
        ...
