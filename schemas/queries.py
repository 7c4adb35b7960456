"""The query API of the trace store, as data: filters in, pages and aggregates out.

The same models travel over HTTP between the server and the app, and both backends (DuckDB and
Elasticsearch) answer them identically.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from schemas.common import ContractModel, OutcomeStatus, RoutingMode
from schemas.trace import OTEL_TRACE_ID_PATTERN, ShadowDecision

__all__ = [
    "BUCKETS",
    "AggregateQuery",
    "BucketStats",
    "ConstraintStat",
    "Misroute",
    "TraceFilter",
    "TracePage",
    "TraceSummary",
    "TrafficEdge",
    "UNSET_FIELDS",
    "UnsetField",
]

BUCKETS: dict[str, int] = {"1m": 60, "5m": 300, "15m": 900, "1h": 3600, "6h": 21600, "1d": 86400}
UnsetField = Literal["rule", "model", "instance"]
UNSET_FIELDS: dict[UnsetField, str] = {"rule": "rule", "model": "selected_model", "instance": "selected_instance"}
"""The names :attr:`TraceFilter.unset` takes, in the order it keeps them, and the trace field each asks to be empty
(every store's column or document field of that name)."""


class TraceFilter(ContractModel):
    """Which traces: every given field must match (``start`` inclusive, ``end`` exclusive)."""

    start: datetime | None = None
    end: datetime | None = None
    router_version: str | None = None
    experiment_arm: str | None = None
    rule: str | None = None
    model: str | None = Field(None, description="The selected model.")
    instance: str | None = Field(None, description="The selected instance.")
    fallback: bool | None = None
    outcome: OutcomeStatus | None = None
    query_hash: str | None = None
    otel_trace_id: str | None = Field(None, pattern=OTEL_TRACE_ID_PATTERN,
                                      description="The W3C trace id the request carried or began (32 hex).")
    min_latency_ms: float | None = Field(None, ge=0, description="Gateway latency at least this (ms).")
    max_latency_ms: float | None = Field(None, ge=0, description="Gateway latency below this (ms).")
    violation: str | None = Field(
        None, pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=200,
        description="A constraint (its name) that a candidate of the decision violated, hard or soft.")
    unset: list[UnsetField] | None = Field(
        None, description="Fields the trace must hold no value in: rule (no rule matched), model (no model "
                          "selected), instance (not routed to an instance). In a query string: unset=model, "
                          "several comma-separated (unset=model,instance) or repeated.")

    @field_validator("unset", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        # A query string's form: one parameter, its names comma-separated.
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value

    @field_validator("unset")
    @classmethod
    def _canonical(cls, value: list[UnsetField] | None) -> list[UnsetField] | None:
        return [name for name in UNSET_FIELDS if name in value] if value else None

    @model_validator(mode="after")
    def _unset_not_given(self) -> TraceFilter:
        given = [name for name in self.unset or () if getattr(self, name) is not None]
        if given:
            raise ValueError(f"unset names {', '.join(given)}, which the filter also gives a value "
                             "(a trace cannot have both): drop one")
        return self

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError(f"{info.field_name} must carry a time zone")
        return value

    @field_validator("end")
    @classmethod
    def _not_before_start(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("start")  # absent when start itself was refused
        if value is not None and start is not None and value < start:
            raise ValueError("end must not be before start (a window from start, inclusive, to end, exclusive)")
        return value


class TraceSummary(ContractModel):
    """One row of a search result: the decision without its candidates and steps."""

    request_id: str
    ts: datetime
    router_version: str
    experiment_arm: str | None = None
    rule: str | None = None
    query_hash: str
    selected_model: str | None = None
    selected_instance: str | None = None
    fallback_triggered: bool = False
    mode: RoutingMode = RoutingMode.NORMAL
    outcome_status: OutcomeStatus
    http_status: int
    latency_ms: float
    total_ms: float
    cost: float | None = None
    detail: bool = Field(True, description="False when candidate detail was sampled out.")
    shadow: ShadowDecision | None = Field(None, description="What the shadow policy decided beside the live "
                                                             "one (``experiments.shadow``), when one did.")
    otel_trace_id: str | None = Field(None, description="The request's W3C trace id (32 hex): the client's, or "
                                                        "one the gateway began.")


class TracePage(ContractModel):
    """A page of summaries, newest first; pass ``next_cursor`` back for the next page."""

    items: list[TraceSummary]
    next_cursor: str | None = None


class AggregateQuery(ContractModel):
    """Aggregate the traces matching ``filter`` by time bucket (``start`` and ``end`` required)."""

    filter: TraceFilter
    bucket: Literal["1m", "5m", "15m", "1h", "6h", "1d"] = "1h"

    @model_validator(mode="after")
    def _bounded(self) -> AggregateQuery:
        if self.filter.start is None or self.filter.end is None:
            raise ValueError("aggregates need filter.start and filter.end")
        if self.filter.end <= self.filter.start:
            raise ValueError("filter.end must be after filter.start")
        return self


class BucketStats(ContractModel):
    """One time bucket of traffic (latencies are the requests' total time, in ms)."""

    start: datetime
    requests: int
    errors: int
    fallbacks: int
    fallback_rate: float
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None
    cost: float = 0.0
    feedback: int = Field(0, description="Feedback records on these requests.")
    misroutes: int = Field(0, description="Feedback records saying the routing was wrong.")
    misroute_rate: float | None = Field(None, description="misroutes / feedback; None without feedback.")


class TrafficEdge(ContractModel):
    """How many requests went rule -> model -> instance."""

    rule: str | None
    model: str | None
    instance: str | None
    requests: int


class ConstraintStat(ContractModel):
    """How often one constraint (a filter's name) removed one instance from the feasible set, in a window.

    ``decisive``: removals where the removed candidate would otherwise have won (its would-be total,
    ``weight_factor * sum(weight_i * score_terms[i])`` when its terms were recorded, beat the selected
    candidate's total). ``undecided``: removals whose would-be total is unknown (no terms recorded).
    ``soft``: soft violations (score scaled, not removed). The router records terms for a removed
    candidate only when nothing was feasible and ``on_empty: fail_open`` scored every candidate, so
    most removals are ``undecided``.
    """

    constraint: str
    instance: str
    model: str
    removed: int = Field(ge=0)
    decisive: int = Field(0, ge=0)
    undecided: int = Field(0, ge=0)
    soft: int = Field(0, ge=0)


class Misroute(ContractModel):
    """A feedback record saying a routed request went wrong, with what the trace chose."""

    request_id: str
    ts: datetime = Field(description="When the feedback came.")
    trace_ts: datetime | None = None
    selected_model: str | None = None
    selected_instance: str | None = None
    rule: str | None = None
    expected_model: str | None = None
    expected_class: str | None = None
    source: str = "client"
