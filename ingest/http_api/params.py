"""The query parameters of the store's read routes, as the models that validate them (and describe them).

Each read route validates its whole query string with one model here (:func:`query_of`), and the
store's OpenAPI description (:mod:`ingest.http_api.openapi`) lists the same models' fields as its
parameters. Trace filters are :class:`schemas.queries.TraceFilter`'s; a window is a required
``start`` and ``end`` with a zone. A parameter a route reads is taken once: given twice, it is a
400 naming it (:func:`query_values`), except a list's (:data:`LIST_PARAMS`), whose repeats join it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import datetime
from typing import Literal, TypeVar

from aiohttp import web
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ingest.duckdb.latches import INTERVAL_LIMIT
from ingest.pipeline.quarantine import describe_validation_error
from ingest.trace_store import MAX_LIMIT
from schemas.common import ProbeKind
from schemas.experiments import CompareBy
from schemas.queries import AggregateQuery, TraceFilter
from schemas.query_params import GivenTwice, one_value_each

__all__ = ["COMPARE_PARAMS", "LIST_PARAMS", "BadParam", "BucketsQuery", "EventsQuery", "FeedbackQuery", "GroupsQuery",
           "LatchesQuery", "MisroutesQuery", "ProbesQuery", "QuarantineQuery", "SearchQuery", "SeriesQuery",
           "SnapshotsQuery", "aggregate_query_of", "bad_param_of", "filter_of", "query_of", "query_values",
           "required_time", "trace_filter_of"]

Q = TypeVar("Q", bound=BaseModel)


class BadParam(ValueError):
    """A query parameter the route's model refused (a 400 ``invalid_parameter`` naming it)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


class _Query(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Limit(_Query):
    limit: int = Field(100, ge=1, le=MAX_LIMIT, description="Items at most.")


class _Span(_Query):
    """A required window; ``end`` before ``start`` is refused (as ``GET /v1/traces`` refuses it), not answered empty."""

    start: AwareDatetime = Field(description="Inclusive, ISO 8601 with a zone.")
    end: AwareDatetime = Field(description="Exclusive, ISO 8601 with a zone.")

    @field_validator("end")
    @classmethod
    def _not_before_start(cls, value: datetime, info: ValidationInfo) -> datetime:
        start = info.data.get("start")  # absent when start itself was refused
        if start is not None and value < start:
            raise ValueError("end must not be before start (a window from start, inclusive, to end, exclusive)")
        return value


class _Window(_Span):
    limit: int = Field(100, ge=1, le=MAX_LIMIT, description="Items at most.")


class SearchQuery(TraceFilter, _Limit):
    """``GET /v1/traces``: the filters, a page size and the cursor of the previous page."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    cursor: str | None = Field(None, max_length=4096, description="The previous page's next_cursor.")


class MisroutesQuery(TraceFilter, _Limit):
    """``GET /v1/analytics/misroutes``."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class FeedbackQuery(_Query):
    """``GET /v1/feedback``: the request whose verdicts to read."""

    request_id: str = Field(min_length=1, max_length=128, description="The request's id (x-request-id).")
    settle: bool = Field(True, description="With none stored, write what waits first (read-your-writes); false: "
                                           "nothing is written, and verdicts waiting in the pipeline count.")


class BucketsQuery(TraceFilter):
    """``GET /v1/analytics/buckets``: the filters (``start`` and ``end`` needed) and the bucket size."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    bucket: Literal["1m", "5m", "15m", "1h", "6h", "1d"] = "1h"


class SeriesQuery(BucketsQuery):
    """``GET /v1/analytics/experiment-series``: two sides, the filters (``start``, ``end`` needed), the bucket."""

    by: CompareBy = Field("arm", description="What a and b are: arms, router versions or policy hashes.")
    a: str = Field(min_length=1, max_length=200, description="Side A (an arm, a router version or a policy hash).")
    b: str = Field(min_length=1, max_length=200, description="Side B, not A.")


class ProbesQuery(_Window):
    """``GET /v1/probes``."""

    instance: str | None = None
    kind: ProbeKind | None = None


class EventsQuery(_Window):
    """``GET /v1/events``."""

    kind: str | None = None


class SnapshotsQuery(_Window):
    """``GET /v1/snapshots``."""

    instance: str | None = None


class LatchesQuery(_Span):
    """``GET /v1/analytics/latches``: a window, an instance, and how many intervals at most (the newest)."""

    instance: str | None = None
    limit: int = Field(INTERVAL_LIMIT, ge=1, le=INTERVAL_LIMIT, description="Intervals at most, the newest.")


class QuarantineQuery(_Window):
    """``GET /v1/quarantine``."""


class GroupsQuery(_Span):
    """``GET /v1/analytics/groups``."""

    by: CompareBy = "arm"


def query_of(model: type[Q], request: web.Request) -> Q:
    """The request's query string validated by ``model``.

    Raises:
        BadParam: A parameter is missing or invalid (the first one, named).
    """
    raw = query_values(request, model.model_fields)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise bad_param_of(exc, model, request) from exc


# The parameters that take a comma-separated list; repeated (the OpenAPI form of a list), their values join it.
LIST_PARAMS = frozenset({"unset", "shares"})


def query_values(request: web.Request, names: Collection[str]) -> dict[str, str]:
    """The query string's parameters among ``names``, one value each (the others are ignored).

    Raises:
        BadParam: One of ``names`` that takes one value is given twice (``?model=a&model=b``): which
            one was meant is the client's to say. A list's repeats (:data:`LIST_PARAMS`) are joined.
    """
    try:
        return one_value_each(request.query.items(), names, LIST_PARAMS)
    except GivenTwice as exc:
        raise BadParam(exc.param, str(exc)) from exc


_PLUS = " (a '+' in a URL's query reads as a space: write a zone's '+' as %2B, or give the time in UTC with Z)"


def bad_param_of(exc: ValidationError, model: type[BaseModel], request: web.Request) -> BadParam:
    """The 400 for a query string ``model`` refused: the first parameter at fault, named.

    A check across fields (``a and b must differ``, ``end must be after start``) has no location of its
    own: the parameter is the first of the model's fields its message names. A time whose zone's ``+``
    arrived as a space (unescaped in the URL) says so.
    """
    err = exc.errors(include_input=False, include_url=False)[0]
    if err["loc"]:
        param, message = str(err["loc"][0]), describe_validation_error(exc)
    else:
        message = err["msg"].removeprefix("Value error, ")
        named = [w for w in re.findall(r"[a-z_]+", message) if w in model.model_fields]
        param = named[0] if named else "query"
    if " " in request.query.get(param, "") and param in ("start", "end"):
        message += _PLUS
    return BadParam(param, message)


FILTERS = set(TraceFilter.model_fields)


def trace_filter_of(q: TraceFilter) -> TraceFilter:
    """The trace filter a route's query model carries (its own extra fields left out)."""
    return TraceFilter.model_validate(q.model_dump(include=FILTERS, exclude_unset=True))


def aggregate_query_of(q: BucketsQuery) -> AggregateQuery:
    """The aggregate a buckets route's query asks for: its filters over a window it must bound.

    Raises:
        BadParam: ``start`` or ``end`` is missing, or ``end`` is not after ``start``.
    """
    if q.start is None or q.end is None:
        bound = "start" if q.start is None else "end"
        raise BadParam(bound, f"{bound} is required: aggregates are over a window")
    if q.end <= q.start:
        raise BadParam("end", "end must be after start")
    return AggregateQuery(filter=trace_filter_of(q), bucket=q.bucket)


def filter_of(request: web.Request) -> TraceFilter:
    """The trace filter in a request's query string (:class:`BadParam` naming the first field refused)."""
    raw = query_values(request, FILTERS)
    try:
        return TraceFilter.model_validate(raw)
    except ValidationError as exc:
        raise bad_param_of(exc, TraceFilter, request) from exc


COMPARE_PARAMS = {"a", "b", "by", "min_samples", "confidence", "alpha", "replicates", "seed"}


def required_time(request: web.Request, name: str) -> datetime:
    """Return the required ISO 8601 time ``name`` (``start`` or ``end``), given once; it must carry a zone."""
    value = query_values(request, (name,)).get(name)
    if value is None:
        raise BadParam(name, f"{name} is required")
    try:
        ts = datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadParam(name, f"{name} is not an ISO 8601 time" + (_PLUS if " " in value else "")) from exc
    if ts.tzinfo is None:
        raise BadParam(name, f"{name} must carry a time zone")
    return ts
