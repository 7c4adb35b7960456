"""The store's routes for its OpenAPI description (:func:`schemas.openapi.openapi_document`).

Parameters are the models of :mod:`ingest.http_api.params` that the routes validate their query
strings with; answers are the models the routes serialize (the ``*Answer`` wrappers here are what
the list routes return: :mod:`ingest.http_api.routes` builds them).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, RootModel

from ingest.duckdb.latches import LatchIntervals
from ingest.http_api.params import (
    BucketsQuery,
    EventsQuery,
    FeedbackQuery,
    GroupsQuery,
    LatchesQuery,
    MisroutesQuery,
    ProbesQuery,
    QuarantineQuery,
    SearchQuery,
    SeriesQuery,
    SnapshotsQuery,
)
from schemas.experiments import CompareBy, CompareQuery, CompareReport
from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.openai_chat import ErrorResponse
from schemas.openapi import Answer, Operation
from schemas.policy_record import PolicyRecord
from schemas.probe import ProbeResult
from schemas.queries import BucketStats, ConstraintStat, Misroute, TraceFilter, TracePage, TrafficEdge
from schemas.records import QuarantinedRecord, RouterEvent
from schemas.trace import DecisionTrace

__all__ = ["BucketsAnswer", "ConstraintsAnswer", "EventsAnswer", "FeedbackAnswer", "GroupsAnswer", "MisroutesAnswer",
           "ProbesAnswer", "QuarantineAnswer", "STORE_OPERATIONS", "SeriesAnswer", "SnapshotsAnswer", "TraceBatch",
           "TrafficAnswer", "WindowAnswer"]


class BucketsAnswer(BaseModel):
    """``GET /v1/analytics/buckets``."""

    buckets: list[BucketStats]


class WindowAnswer(BaseModel):
    """``GET /v1/analytics/window``: the window as one bucket (None: no request), with its own latency quantiles."""

    window: BucketStats | None


class TrafficAnswer(BaseModel):
    """``GET /v1/analytics/traffic``."""

    edges: list[TrafficEdge]


class ConstraintsAnswer(BaseModel):
    """``GET /v1/analytics/constraints``."""

    constraints: list[ConstraintStat]


class MisroutesAnswer(BaseModel):
    """``GET /v1/analytics/misroutes``."""

    misroutes: list[Misroute]


class FeedbackAnswer(BaseModel):
    """``GET /v1/feedback``: every verdict on one request, oldest first."""

    feedback: list[Feedback]


class GroupsAnswer(BaseModel):
    """``GET /v1/analytics/groups``: requests per arm, version or policy."""

    by: CompareBy
    groups: dict[str, int]


class SeriesAnswer(BaseModel):
    """``GET /v1/analytics/experiment-series``: each side's buckets holding a request, oldest first.

    Requests forced onto an arm by header, and their feedback, are left out, as ``compare`` leaves them out.
    """

    by: CompareBy
    a: str
    b: str
    buckets_a: list[BucketStats]
    buckets_b: list[BucketStats]


class ProbesAnswer(BaseModel):
    """``GET /v1/probes``."""

    results: list[ProbeResult]


class EventsAnswer(BaseModel):
    """``GET /v1/events``."""

    events: list[RouterEvent]


class SnapshotsAnswer(BaseModel):
    """``GET /v1/snapshots``."""

    snapshots: list[InstanceSnapshot]


class QuarantineAnswer(BaseModel):
    """``GET /v1/quarantine``."""

    records: list[QuarantinedRecord]


class TraceBatch(RootModel[list[DecisionTrace]]):
    """``POST /v1/traces``: traces as a JSON array (NDJSON, one per line, is taken too); each validated alone."""


class _RequestId(BaseModel):
    request_id: str = Field(min_length=1)


class _PolicyHash(BaseModel):
    policy_hash: str = Field(min_length=1)


class _WindowParams(TraceFilter):
    """``GET /v1/analytics/window``: the filters, ``start`` and ``end`` required (the route refuses either absent)."""

    start: datetime = Field(description="Inclusive, ISO 8601 with a zone.")
    end: datetime = Field(description="Exclusive, ISO 8601 with a zone.")


class _BucketsParams(BucketsQuery):
    """``GET /v1/analytics/buckets``: ``start`` and ``end`` required, as the route requires them."""

    start: datetime = Field(description="Inclusive, ISO 8601 with a zone.")
    end: datetime = Field(description="Exclusive, ISO 8601 with a zone.")


class _SeriesParams(SeriesQuery):
    """``GET /v1/analytics/experiment-series``: ``start`` and ``end`` required, as the route requires them."""

    start: datetime = Field(description="Inclusive, ISO 8601 with a zone.")
    end: datetime = Field(description="Exclusive, ISO 8601 with a zone.")


class _CompareParams(CompareQuery):
    """``GET /v1/analytics/compare``: the query's fields (``shares`` as ``a_share,b_share``)."""

    model_config = ConfigDict(extra="ignore")


_BAD = Answer("A parameter is missing or invalid", ErrorResponse)
_AUTH = Answer("A read token is required (storage.read_token_env)", ErrorResponse)
_DOWN = Answer("The store cannot answer now", ErrorResponse)


def _read(path: str, summary: str, answer: type[BaseModel], query: type[BaseModel] | None = None,
          path_params: type[BaseModel] | None = None, *, missing: bool = False) -> Operation:
    answers = {200: Answer(summary, answer), 400: _BAD, 401: _AUTH, 503: _DOWN}
    if missing:
        answers[404] = Answer("Not found", ErrorResponse)
    return Operation("GET", path, summary, answers, tag="store", query=query, path_params=path_params,
                     security=("read_token",))


STORE_OPERATIONS: tuple[Operation, ...] = (
    Operation("POST", "/v1/traces", "Intake: traces as a JSON array (or NDJSON); a verdict per line", {
        200: Answer("Every line accepted"), 207: Answer("Some lines refused (quarantined)"),
        400: _BAD, 401: Answer("An intake token is required", ErrorResponse),
        408: Answer("The body did not arrive within gateway.body_timeout_s of its headers", ErrorResponse),
        413: Answer("The body is over storage.intake_max_bytes", ErrorResponse),
        415: Answer("The body is compressed (Content-Encoding): bodies are read as sent", ErrorResponse),
        422: Answer("Every line refused")},
        tag="store", body=TraceBatch, security=("intake_token",)),
    _read("/v1/traces", "One page of trace summaries, newest first", TracePage, SearchQuery),
    _read("/v1/traces/{request_id}", "One trace (emitted ones not yet stored included)", DecisionTrace,
          path_params=_RequestId, missing=True),
    _read("/v1/policies/{policy_hash}", "The effective policy stored under a trace's policy_hash", PolicyRecord,
          path_params=_PolicyHash, missing=True),
    _read("/v1/analytics/buckets", "Requests, latency quantiles, fallbacks, cost, misroutes per time bucket",
          BucketsAnswer, _BucketsParams),
    _read("/v1/analytics/window", "The whole window as one bucket: totals and the window's own latency quantiles",
          WindowAnswer, _WindowParams),
    _read("/v1/analytics/traffic", "Requests along rule -> model -> instance", TrafficAnswer, TraceFilter),
    _read("/v1/analytics/constraints", "Removals per constraint, instance and model", ConstraintsAnswer, TraceFilter),
    _read("/v1/analytics/misroutes", "Feedback saying the routing was wrong, with its trace", MisroutesAnswer,
          MisroutesQuery),
    _read("/v1/feedback", "Every verdict recorded on one request (correct or not), oldest first", FeedbackAnswer,
          FeedbackQuery),
    _read("/v1/analytics/compare", "Two arms, versions or policies compared", CompareReport, _CompareParams),
    _read("/v1/analytics/groups", "Requests per arm, version or policy in a window", GroupsAnswer, GroupsQuery),
    _read("/v1/analytics/experiment-series", "Two arms, versions or policies per time bucket, forced requests left out",
          SeriesAnswer, _SeriesParams),
    _read("/v1/analytics/latches", "When each latch held an instance out, from the snapshots of a window",
          LatchIntervals, LatchesQuery, missing=True),
    _read("/v1/probes", "Probe results", ProbesAnswer, ProbesQuery),
    _read("/v1/events", "Router events", EventsAnswer, EventsQuery),
    _read("/v1/snapshots", "Instance snapshots", SnapshotsAnswer, SnapshotsQuery),
    _read("/v1/quarantine", "Quarantined records", QuarantineAnswer, QuarantineQuery),
)
