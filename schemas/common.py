"""Shared enums, the base model every contract model derives from, and the stored records' time type."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

__all__ = [
    "EARLIEST_TIME",
    "LATEST_TIME",
    "AttemptStatus",
    "ContractModel",
    "Language",
    "MaybeUtcTime",
    "OutcomeStatus",
    "ProbeKind",
    "ProbeVerdict",
    "RoutingMode",
    "StepKind",
    "UtcTime",
]

# The instants a stored record may carry (its ``ts``, a latch's ``since``...): from the Unix epoch
# to the last day of year 9999 in UTC, that day excepted. Any such instant converts to UTC, to
# any other zone (offsets are under a day) and to epoch microseconds without overflow, and floors
# or ceils to its minute; a request time outside it is a bad clock or forged input, not a request.
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIME = datetime(9999, 12, 31, tzinfo=UTC)  # exclusive


@dataclass(frozen=True)
class _UtcRange:
    """pydantic metadata: the datetime must carry a zone and lie in [EARLIEST_TIME, LATEST_TIME) once in UTC.

    Written as the core schema's own constraints (``tz_constraint``, ``ge``, ``lt``), not a validator
    function, so that the store's check on Arrow columns (``ingest.codec.contract``) can read it.
    """

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        if source is not datetime and not (datetime in get_args(source) and type(None) in get_args(source)):
            raise TypeError(f"the UTC range applies to datetime or datetime | None, not {source!r}")
        when = core_schema.datetime_schema(tz_constraint="aware", ge=EARLIEST_TIME, lt=LATEST_TIME)
        return when if source is datetime else core_schema.nullable_schema(when)


# An aware datetime within [EARLIEST_TIME, LATEST_TIME) in UTC: every time field of a stored record.
UtcTime = Annotated[datetime, _UtcRange()]
# The same, or None. (Written as one Annotated, not ``UtcTime | None``: pydantic then keeps the plain
# ``datetime | None`` as the field's annotation, which schemas.derive maps onto Arrow.)
MaybeUtcTime = Annotated[datetime | None, _UtcRange()]


class ContractModel(BaseModel):
    """Frozen, strict-keys base: unknown fields are errors, values never change after build."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class StepKind(StrEnum):
    """Which stage of the router pipeline wrote a decision step."""

    ANALYSE = "analyse"
    POLICY = "policy"
    FILTER = "filter"
    SCORE = "score"
    PICK = "pick"
    FALLBACK = "fallback"
    ATTEMPT = "attempt"


class RoutingMode(StrEnum):
    """How the decision was reached: normally, or in one of the degraded modes."""

    NORMAL = "normal"
    FAIL_OPEN = "fail_open"
    STATIC = "static"
    SAFE = "safe"
    CACHE = "cache"
    RULES = "rules"


class AttemptStatus(StrEnum):
    """Result of one forwarding attempt to an instance."""

    OK = "ok"
    HTTP_ERROR = "http_error"
    CONNECT_ERROR = "connect_error"
    TIMEOUT = "timeout"


class OutcomeStatus(StrEnum):
    """Final result of a request as the client saw it."""

    OK = "ok"
    ERROR = "error"


class Language(StrEnum):
    """Dominant language of the analysed text."""

    ZH = "zh"
    EN = "en"
    MIXED = "mixed"
    UNKNOWN = "unknown"


class ProbeKind(StrEnum):
    """The three synthetic probes of the seed."""

    SYNTAX = "syntax"
    LATENCY = "latency"
    SEMANTIC = "semantic"


class ProbeVerdict(StrEnum):
    """What one probe (or the hysteresis over several) concluded: ``degraded`` is not ``failed``."""

    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"
