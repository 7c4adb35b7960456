"""Stored traces as the few values a replay reads: :class:`ReplayRow`.

A replay needs what ``Router.decide`` read (features, intent, time, request id, each candidate's
state) plus what the report compares against (the stored choice, its score terms and weights) and
what the inverse-propensity estimate reads (the logged selection probability, cost and feedback).
:func:`row_of` takes them from a :class:`DecisionTrace` (its feedback from :func:`misroutes_of`);
:mod:`app.experiments.bulk` reads them straight from DuckDB's columns, sharing one snapshot object
per stored snapshot id, which is what lets the router's per-snapshot memo hit across traces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, overload

from schemas.fleet import InstanceSnapshot
from schemas.queries import AggregateQuery, TraceFilter
from schemas.trace import DecisionTrace, RequestFeatures
from schemas.trace_inputs import DecisionInputs

if TYPE_CHECKING:
    from ingest import TraceStore

__all__ = ["NO_CANDIDATES", "NO_STATE", "SAMPLED_OUT", "UNREADABLE", "ReplayRow", "Settled", "StoredTerms",
           "misroutes_of", "row_of", "settled_of"]

SAMPLED_OUT = "detail sampled out (candidate states not stored)"
UNREADABLE = "its stored record does not load"
NO_STATE = "a candidate has no recorded state"
NO_CANDIDATES = "no candidates recorded"


class StoredTerms(Sequence[list[float]]):
    """Each candidate's stored score terms, cut from one flat list only when asked for.

    A replay reads them for flips and for stored quality terms alone, so the bulk reader keeps the
    batch's flat list and each row's offsets instead of a list per candidate.
    """

    __slots__ = ("_base", "_bounds", "_flat")

    def __init__(self, flat: list[float], base: int, bounds: list[tuple[int, int]]) -> None:
        self._flat, self._base, self._bounds = flat, base, bounds  # (start, end) after ``base`` per candidate

    def __len__(self) -> int:
        return len(self._bounds)

    @overload
    def __getitem__(self, i: int) -> list[float]: ...
    @overload
    def __getitem__(self, i: slice) -> list[list[float]]: ...
    def __getitem__(self, i: int | slice) -> list[float] | list[list[float]]:
        base = self._base
        if isinstance(i, slice):
            return [self._flat[base + lo:base + hi] for lo, hi in self._bounds[i]]
        lo, hi = self._bounds[i]
        return self._flat[base + lo:base + hi]


@dataclass(frozen=True, slots=True)
class Settled:
    """What the gateway settled for a stored decision besides features and states (see ``DecisionTrace.inputs``).

    ``stepped``: the trace has a policy step (a rule set or intents ran), whose ``rule``, ``target``
    and ``throttled`` these are.
    """

    stepped: bool
    rule: str | None
    target: str | None
    throttled: str | None
    inputs: DecisionInputs


def settled_of(step: Mapping[str, Any] | None, inputs: Mapping[str, Any] | None) -> Settled | None:
    """The settled inputs from a stored policy step and ``inputs`` (None: neither was stored)."""
    if step is None and inputs is None:
        return None
    step = step or {}
    return Settled(bool(step), step.get("rule"), step.get("target"), step.get("throttled"),
                   DecisionInputs.model_validate(inputs or {}))


@dataclass(slots=True)
class ReplayRow:
    """One stored decision, reduced to what replaying and reporting it read.

    ``model`` and ``instance`` are the live decision's first choice (rank 1; a retry may have served
    another). ``candidates`` holds ``(instance, model)`` in stored order, aligned with ``terms`` (raw score
    terms, aligned with ``weights``). ``missing`` names why the row cannot be replayed (None: it can).
    """

    request_id: str
    ts: datetime
    features: RequestFeatures | None
    intent: str | None
    rule: str | None
    model: str | None
    instance: str | None
    states: dict[str, InstanceSnapshot]
    candidates: tuple[tuple[str, str], ...]
    terms: Sequence[list[float]]
    weights: tuple[tuple[str, float], ...]
    cost: float | None
    missing: str | None = None
    selection_probability: float | None = None  # the live picker's chance of the served instance
    misroute: bool | None = None  # feedback said the routing was wrong (None: no feedback read)
    settled: Settled | None = None  # the rule matched, the mode, affinity, budget, breakers (None: none)


def row_of(trace: DecisionTrace, *, detail: bool = True, misroute: bool | None = None) -> ReplayRow:
    """Return the replay view of ``trace`` (``detail``: the store kept its candidate states).

    ``misroute``: what its feedback said, as :func:`misroutes_of` reads it (None: no feedback).
    """
    states = {c.instance: c.state for c in trace.candidates if c.state is not None}
    missing = None
    if not detail:
        missing = SAMPLED_OUT
    elif not trace.candidates:
        missing = NO_CANDIDATES
    elif len(states) < len(trace.candidates):
        missing = NO_STATE
    first = next((c for c in trace.candidates if c.rank == 1), None)  # a retry may have served another instance
    return ReplayRow(
        request_id=trace.request_id, ts=trace.ts, features=trace.features, intent=trace.intent, rule=trace.rule,
        model=trace.selected_model if first is None else first.model,
        instance=trace.selected_instance if first is None else first.instance, states=states,
        candidates=tuple((c.instance, c.model) for c in trace.candidates),
        terms=[list(c.score_terms) for c in trace.candidates],
        weights=tuple((w.name, w.weight) for w in trace.score_weights),
        cost=trace.outcome.cost, missing=missing, selection_probability=trace.selection_probability, misroute=misroute,
        settled=settled_of(None if trace.policy is None else trace.policy.model_dump(include={"rule", "target",
                                                                                              "throttled"}),
                           None if trace.inputs is None else trace.inputs.model_dump()),
    )


_MINUTE = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TICK = timedelta(microseconds=1)  # the stores keep ts to the microsecond (DuckDB) or finer (date_nanos)


def _minute(ts: datetime) -> datetime:
    return _EPOCH + (ts - _EPOCH) // _MINUTE * _MINUTE


def misroutes_of(store: TraceStore, flt: TraceFilter, traces: Sequence[DecisionTrace]) -> dict[str, bool]:
    """What feedback said of each of ``traces`` (each matching ``flt``), as the bulk reader reads it from the file.

    True when a feedback record on the request said ``correct=false``, False when all said it was
    right; a request without feedback is left out. One aggregate by minute over the traces' span
    finds the minutes holding any feedback; each trace of those minutes is read by its request id
    (``TraceStore.feedback``). Only traces with a logged selection probability are looked up: the
    estimate reads no other.
    """
    wanted = [t for t in traces if t.selection_probability is not None]
    if not wanted:
        return {}
    span = flt.model_copy(update={"start": min(t.ts for t in wanted), "end": max(t.ts for t in wanted) + _TICK})
    busy = {b.start for b in store.aggregate(AggregateQuery(filter=span, bucket="1m")) if b.feedback}
    out: dict[str, bool] = {}
    for t in wanted:
        if _minute(t.ts) in busy and (verdicts := store.feedback(t.request_id)):
            out[t.request_id] = any(not v.correct for v in verdicts)
    return out
