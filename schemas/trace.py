"""The decision trace: one record per request saying what the router did and why.

The raw query is never part of it; ``query_hash`` (see :mod:`schemas.hashing`) stands in for it.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from schemas.common import (
    AttemptStatus,
    ContractModel,
    Language,
    OutcomeStatus,
    RoutingMode,
    StepKind,
)
from schemas.fleet import InstanceSnapshot
from schemas.version import SCHEMA_VERSION

__all__ = [
    "Attempt",
    "CandidateEval",
    "DecisionStep",
    "DecisionTrace",
    "Outcome",
    "RequestFeatures",
    "ScoreTerm",
    "Violation",
]

QUERY_HASH_PATTERN = r"^(sha256|hmac-sha256):[0-9a-f]{64}$"


class RequestFeatures(ContractModel):
    """What analysis extracted from the request; never the text itself."""

    requested_model: str
    n_messages: int = Field(ge=0)
    input_chars: int = Field(ge=0)
    est_input_tokens: int = Field(ge=0)
    max_tokens: int | None = Field(None, ge=0)
    stream: bool = False
    language: Language = Language.UNKNOWN
    has_attachments: bool = False
    analysed_chars: int = Field(0, ge=0, description="Characters analysed (input is cut at a limit).")
    truncated: bool = False


class Violation(ContractModel):
    """A hard constraint an instance failed: which, on what metric, with what value and bound."""

    constraint: str
    metric: str
    op: str
    value: float | None = Field(description="Observed value; None when there was no data.")
    threshold: float
    reason: str
    since: datetime | None = None


class ScoreTerm(ContractModel):
    """One weighted term of a candidate's score."""

    name: str
    raw: float
    weight: float
    weighted: float


class CandidateEval(ContractModel):
    """Everything the router knew and concluded about one candidate instance."""

    instance: str
    model: str
    zone: str | None = None
    feasible: bool
    violations: list[Violation] = []
    state: InstanceSnapshot | None = None
    score_terms: list[ScoreTerm] = []
    total: float | None = None
    rank: int | None = Field(None, ge=1, description="1 is best among feasible candidates.")


class DecisionStep(ContractModel):
    """One ordered step of the decision, in the seed's ``{step, value, reason}`` shape."""

    seq: int = Field(ge=0)
    step: str = Field(description="Step name, e.g. 'analyse', 'filter/kv-cache', 'pick'.")
    kind: StepKind
    value: float | None = None
    reason: str = ""
    plugin: str | None = Field(None, description="typed name 'name/type' of the plugin.")
    instances: list[str] = Field(default=[], description="Instances this step kept or chose.")
    rejected: list[str] = []
    duration_us: float | None = Field(None, ge=0)


class Attempt(ContractModel):
    """One try at forwarding the request to an instance."""

    seq: int = Field(ge=0)
    instance: str
    model: str
    status: AttemptStatus
    http_status: int | None = None
    error_class: str | None = None
    latency_ms: float = Field(ge=0)


class Outcome(ContractModel):
    """What the client finally got."""

    status: OutcomeStatus
    http_status: int
    error_class: str | None = None
    prompt_tokens: int | None = Field(None, ge=0)
    completion_tokens: int | None = Field(None, ge=0)
    cost: float | None = Field(None, ge=0)
    ttft_ms: float | None = Field(None, ge=0)
    total_ms: float = Field(ge=0)


class DecisionTrace(ContractModel):
    """The structured record of one routing decision and its outcome."""

    schema_version: int = SCHEMA_VERSION
    request_id: str = Field(min_length=1, max_length=128)
    ts: datetime
    router_version: str
    policy_hash: str
    experiment_arm: str | None = None
    query_hash: str = Field(pattern=QUERY_HASH_PATTERN)
    features: RequestFeatures
    rule: str | None = None
    intent: str | None = None
    intent_confidence: float | None = Field(None, ge=0, le=1)
    candidates: list[CandidateEval] = []
    decision_trace: list[DecisionStep] = []
    selected_model: str | None = None
    selected_instance: str | None = None
    fallback_triggered: bool = False
    fallback_reason: str | None = None
    attempts: list[Attempt] = []
    mode: RoutingMode = RoutingMode.NORMAL
    latency_ms: float = Field(ge=0, description="Time spent deciding, not forwarding.")
    outcome: Outcome
