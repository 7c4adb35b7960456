"""Every time a stored record carries is aware and within 1970 .. 9999 in UTC (``schemas.common.UtcTime``)."""

from __future__ import annotations

import types
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any, Union, get_args, get_origin

import pyarrow as pa
import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from bench.synthetic import TraceFactory
from schemas.common import EARLIEST_TIME, LATEST_TIME
from schemas.derive import arrow_schema
from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.policy_record import PolicyRecord
from schemas.probe import ProbeResult
from schemas.records import QuarantinedRecord, RouterEvent
from schemas.trace import DecisionTrace, Violation

STORED = (DecisionTrace, InstanceSnapshot, ProbeResult, RouterEvent, Feedback, QuarantinedRecord, PolicyRecord)
OUT_OF_YEARS = ["0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:30:00-01:00"]
REFUSED: list[Any] = [
    *OUT_OF_YEARS, "1969-12-31T23:59:59Z", "9999-12-31T00:00:00Z", "2026-11-01T00:00:00",
    datetime(2026, 11, 1), datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
    datetime(9999, 12, 31, 23, 30, tzinfo=timezone(-timedelta(hours=1))), -1,
]
ACCEPTED: list[Any] = [
    "1970-01-01T00:00:00Z", "9999-12-30T23:59:59.999999Z", "9999-12-31T00:30:00+01:00",
    datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 1, 12, tzinfo=timezone(timedelta(hours=14))), 0,
]


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    if model in seen:
        return
    seen.add(model)
    for info in model.model_fields.values():
        stack = [info.annotation]
        while stack:
            ann = stack.pop()
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                _models(ann, seen)
            stack.extend(get_args(ann))


def _time_fields() -> list[tuple[type[BaseModel], str]]:
    seen: set[type[BaseModel]] = set()
    for model in STORED:
        _models(model, seen)
    out = []
    for model in seen:
        for name, info in model.model_fields.items():
            ann = info.annotation
            if ann is datetime or (get_origin(ann) in (Union, types.UnionType) and datetime in get_args(ann)):
                out.append((model, name))
    return sorted(out, key=lambda f: (f[0].__name__, f[1]))


TIME_FIELDS = _time_fields()


def test_the_stored_time_fields_are_found() -> None:
    names = {f"{m.__name__}.{n}" for m, n in TIME_FIELDS}
    assert {"DecisionTrace.ts", "Violation.since", "InstanceSnapshot.scraped_at", "LatchState.since",
            "ProbeStatus.since", "ProbeResult.ts", "RouterEvent.ts", "Feedback.ts", "QuarantinedRecord.ts",
            "PolicyRecord.ts"} <= names


@pytest.mark.parametrize(("model", "name"), TIME_FIELDS, ids=lambda v: getattr(v, "__name__", v))
def test_every_stored_time_is_aware_and_within_the_years(model: type[BaseModel], name: str) -> None:
    info = model.model_fields[name]
    field = TypeAdapter(Annotated[info.annotation, *info.metadata])
    for value in REFUSED:
        with pytest.raises(ValidationError):
            field.validate_python(value)
        if isinstance(value, str):
            with pytest.raises(ValidationError):
                field.validate_json(f'"{value}"')
    for value in ACCEPTED:
        got = field.validate_python(value)
        assert got.utcoffset() is not None and EARLIEST_TIME <= got < LATEST_TIME
        assert got.astimezone(timezone(timedelta(hours=14))) and got.astimezone(timezone(-timedelta(hours=12)))


def test_a_trace_outside_the_years_is_refused_with_its_field_named() -> None:
    trace = TraceFactory(seed=3, n_candidates=2).trace()
    for ts in OUT_OF_YEARS:
        with pytest.raises(ValidationError) as err:
            DecisionTrace.model_validate(trace.model_dump() | {"ts": ts})
        assert [e["loc"] for e in err.value.errors()] == [("ts",)]


def test_the_storage_schema_keeps_its_types() -> None:
    trace = arrow_schema(DecisionTrace)
    assert trace.field("ts").type == pa.timestamp("us", tz="UTC") and not trace.field("ts").nullable
    since = arrow_schema(Violation).field("since")
    assert since.type == pa.timestamp("us", tz="UTC") and since.nullable
    scraped = arrow_schema(InstanceSnapshot).field("scraped_at")
    assert scraped.type == pa.timestamp("us", tz="UTC") and scraped.nullable

