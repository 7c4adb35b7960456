"""The contracts of the router pipeline's extension points (after the Gateway API Inference Extension).

Filters judge one candidate at a time and return what it broke; scorers see the whole pool (some
terms, such as cost, are relative) and return one raw value in [0, 1] per candidate; the picker
orders the scored pool. Plugins neither time nor trace themselves: the router does both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Protocol

from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import RequestFeatures, Violation

__all__ = ["Blocked", "Candidate", "Effective", "Filter", "Picked", "Picker", "RequestContext", "Scored", "Scorer"]

Scored = tuple[str, float]  # (instance id, total)


@dataclass(frozen=True, slots=True)
class Effective:
    """Gauges as routing should believe them now (:func:`router_core.state.staleness.effective_state` makes them)."""

    age_s: float | None
    suspect: bool
    kv_cache_usage: float
    queue: float
    running: float


@dataclass(frozen=True, slots=True)
class Candidate:
    """One instance under consideration: its spec, its snapshot, and the gauges to believe now."""

    spec: InstanceSpec
    state: InstanceSnapshot
    eff: Effective


@dataclass(frozen=True, slots=True)
class Blocked:
    """A breaker that let nothing through to an instance when the request was decided.

    Attributes:
        scope: What the breaker guards (``instance``, ``model`` or ``zone``).
        state: Its state (``routelens_breaker_state``'s value: 2 open, 1 half-open with its trial slots taken).
        reason: The sentence the verdict records (the breaker, its state, why it opened).
    """

    scope: str
    state: int
    reason: str


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a plugin may read of one request besides the candidates and its own parameters; no I/O.

    The router decides on a :class:`router_core.decide.decision.DecisionContext`, which extends this with
    what the gateway's state machines settled for the request (the rule, the router's mode, the
    session's instance, the budget): the router reads those, plugins do not, so this package
    needs none of their types.

    Attributes:
        request_id: Seeds tie-breaks and sampling.
        features: What analysis extracted from the request.
        intent: The request's class (None when unknown).
        now: The decision time (UTC).
        quality: Learned P(correct) per (model, class), a snapshot taken for this request; the
            gateway's is a :class:`router_core.state.quality.QualitySnapshot`, which also carries
            P(correct) per (instance, class) and the instances flagged divergent.
        blocked: The instances a breaker let nothing through to, as the gateway's breaker board
            saw them for this request (None: none; the breaker filter reads it, the trace records it).
    """

    request_id: str
    features: RequestFeatures
    intent: str | None
    now: datetime
    quality: Mapping[tuple[str, str], float]
    blocked: Mapping[str, Blocked] | None = None


@dataclass(frozen=True, slots=True)
class Picked:
    """A picker's answer: instance ids in attempt order, and a sentence saying how the first was chosen.

    ``probability`` is the chance the sampling rule gave the first of ``order`` (1.0 for a
    deterministic pick): the propensity an inverse-propensity estimate weighs the request by.
    ``probabilities`` is every candidate's chance of being drawn, by instance (sampling pickers
    only; None for a deterministic pick): what tells a loser it was not drawn, and with what chance.
    """

    order: list[str]
    how: str
    probability: float = 1.0
    probabilities: Mapping[str, float] | None = None


class Filter(Protocol):
    """A hard constraint on candidates.

    ``STATE_ONLY`` filters judge only the instance's spec and fresh snapshot (not the request or
    the clock); the router computes them once per snapshot (:mod:`router_core.decide.prepared`).
    """

    TYPE: ClassVar[str]
    STATE_ONLY: ClassVar[bool]
    name: str

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
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

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return one raw value in [0, 1] per candidate, in pool order (the router clamps)."""
        ...


class Picker(Protocol):
    """Orders the scored, feasible candidates: the first is tried first, the rest are fallbacks."""

    TYPE: ClassVar[str]
    name: str

    def pick(self, request_id: str, scored: Sequence[Scored]) -> Picked:
        """Return every scored instance id in attempt order (empty input: an empty order)."""
        ...
