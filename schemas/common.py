"""Shared enums and the base model every contract model derives from."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

__all__ = [
    "AttemptStatus",
    "ContractModel",
    "Language",
    "OutcomeStatus",
    "ProbeKind",
    "ProbeVerdict",
    "RoutingMode",
    "StepKind",
]


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
