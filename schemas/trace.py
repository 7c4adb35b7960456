"""The decision trace: one record per request saying what the router did and why.

The raw query is never part of it; ``query_hash`` (see :mod:`schemas.hashing`) stands in for it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import (
    AttemptStatus,
    ContractModel,
    Language,
    MaybeUtcTime,
    OutcomeStatus,
    RoutingMode,
    StepKind,
    UtcTime,
)
from schemas.fleet import InstanceSnapshot
from schemas.trace_inputs import DecisionInputs
from schemas.trace_policy import PolicyStep
from schemas.version import SCHEMA_VERSION

__all__ = [
    "Attempt",
    "CandidateEval",
    "DecisionStep",
    "DecisionTrace",
    "Outcome",
    "RequestFeatures",
    "ScoreWeight",
    "ShadowDecision",
    "Violation",
]

QUERY_HASH_PATTERN = r"^(sha256|hmac-sha256):[0-9a-f]{64}$"
OTEL_TRACE_ID_PATTERN = r"^[0-9a-f]{32}$"  # W3C trace context: 16 bytes, lower-case hex, not all zero
OTEL_SPAN_ID_PATTERN = r"^[0-9a-f]{16}$"  # 8 bytes


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
    file_types: list[str] = Field(default=[], description="Attachment types, in order: detected from the bytes.")
    analysed_chars: int = Field(0, ge=0, description="Characters analysed (input is cut at a limit).")
    truncated: bool = False


class Violation(ContractModel):
    """A constraint an instance broke: which, on what metric, with what value and bound.

    ``hard`` violations take the instance out of the feasible set; ``soft`` ones (between a
    constraint's soft and hard threshold) only scale its score down.
    """

    constraint: str
    metric: str
    op: str
    value: float | None = Field(description="Observed value; None when there was no data.")
    threshold: float
    reason: str
    severity: Literal["hard", "soft"] = "hard"
    score_factor: float | None = Field(None, ge=0, le=1, description="For soft violations: the score multiplier.")
    since: MaybeUtcTime = Field(None, description="Since when the instance is latched out.")


class ScoreWeight(ContractModel):
    """One term of the score: its name, weight and the scorer plugin that computes it."""

    name: str
    weight: float = Field(ge=0)
    scorer: str = Field(description="typed name 'name/type' of the scorer.")


class CandidateEval(ContractModel):
    """Everything the router knew and concluded about one candidate instance."""

    instance: str
    model: str
    zone: str | None = None
    feasible: bool
    violations: list[Violation] = []
    state: InstanceSnapshot | None = None
    score_terms: list[float] = Field(
        default=[], description="Raw term values in [0, 1], aligned with DecisionTrace.score_weights."
    )
    weight_factor: float = Field(1.0, ge=0, le=1, description="Soft-constraint ramp applied to the total.")
    total: float | None = Field(None, description="weight_factor * sum(weight_i * score_terms[i]).")
    rank: int | None = Field(None, ge=1, description="1 is best among the ranked candidates.")
    probability: float | None = Field(
        None, ge=0, le=1, description="The chance a sampling picker (softmax, p2c) gave this candidate of "
                                      "being drawn; None for a deterministic pick or a candidate not scored.")


class DecisionStep(ContractModel):
    """One ordered step of the decision, in the seed's ``{step, value, reason}`` shape."""

    seq: int = Field(ge=0)
    step: str = Field(description="Step name, e.g. 'analyse', 'filter/kv-cache', 'pick'.")
    kind: StepKind
    value: float | None = None
    reason: str = ""
    plugin: str | None = Field(None, description="typed name 'name/type' of the plugin.")
    instances: list[str] = Field(default=[], description="Instances this step considered or chose.")
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
    span_id: str | None = Field(None, pattern=OTEL_SPAN_ID_PATTERN,
                                description="The attempt's OpenTelemetry span id, sent upstream in traceparent.")
    start_ms: float | None = Field(None, ge=0, description="When it was sent: ms after the trace's ts (a hedge's "
                                                           "twin starts before its first attempt ends). None: not "
                                                           "recorded (traces from before it was, or from intake).")


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


class ShadowDecision(ContractModel):
    """What a candidate policy, deciding beside the live one without serving, would have chosen."""

    router_version: str
    policy_hash: str
    arm: str | None = Field(None, description="The experiment arm the shadow policy belongs to, if any.")
    selected_model: str | None = None
    selected_instance: str | None = None
    live_rank: int | None = Field(None, ge=1, description="Rank of the live choice under the shadow policy; "
                                                          "None when the shadow ruled it out.")
    flipped: bool = Field(description="The shadow would have served another instance than the live one.")
    latency_ms: float = Field(ge=0, description="Time the shadow decision took (off the request path).")


class DecisionTrace(ContractModel):
    """The structured record of one routing decision and its outcome."""

    schema_version: int = SCHEMA_VERSION
    request_id: str = Field(min_length=1, max_length=128)
    ts: UtcTime
    router_version: str
    policy_hash: str
    experiment_arm: str | None = None
    arm_forced: bool = Field(False, description="The arm was named by the request's forcing header "
                                                "(`experiments.force_header`), not assigned: comparisons and the "
                                                "split check leave such requests out.")
    query_hash: str = Field(pattern=QUERY_HASH_PATTERN)
    features: RequestFeatures
    rule: str | None = None
    policy: PolicyStep | None = Field(None, description="The routing policy's step (None: no policy file).")
    intent: str | None = None
    intent_confidence: float | None = Field(None, ge=0, le=1)
    score_weights: list[ScoreWeight] = []
    candidates: list[CandidateEval] = []
    decision_trace: list[DecisionStep] = []
    selected_model: str | None = None
    selected_instance: str | None = None
    fallback_triggered: bool = False
    fallback_reason: str | None = None
    attempts: list[Attempt] = []
    mode: RoutingMode = RoutingMode.NORMAL
    selection_probability: float | None = Field(
        None, ge=0, le=1, description="Probability the picker gave the selected instance (sampling pickers); "
                                      "1.0 for a deterministic pick, None when nothing was picked.")
    shadow: ShadowDecision | None = None
    inputs: DecisionInputs | None = Field(None, description="What the gateway settled for the decision besides "
                                                            "features and states (None: nothing).")
    latency_ms: float = Field(ge=0, description="Time spent deciding, not forwarding.")
    outcome: Outcome
    otel_trace_id: str | None = Field(None, pattern=OTEL_TRACE_ID_PATTERN,
                                      description="W3C trace id: the client's traceparent's, or one the gateway began.")
    otel_span_id: str | None = Field(None, pattern=OTEL_SPAN_ID_PATTERN, description="The request's span id.")
    otel_parent_span_id: str | None = Field(None, pattern=OTEL_SPAN_ID_PATTERN,
                                            description="The client's span (traceparent's parent id); None when "
                                                        "the gateway began the trace.")
    otel_trace_flags: str | None = Field(None, pattern=r"^[0-9a-f]{2}$",
                                         description="The W3C trace flags (2 hex) the request carried and passed "
                                                     "upstream: the client's, ``01`` (sampled) for a trace begun "
                                                     "here. The exporter honours a client's unsampled ``00``.")
    otel_trace_state: str | None = Field(None, max_length=512,
                                         description="The client's W3C ``tracestate``, as passed upstream with each "
                                                     "attempt's ``traceparent``; the exported spans carry it. None: "
                                                     "the request had none.")

    def terms_of(self, candidate: CandidateEval) -> list[tuple[str, float, float, float]]:
        """Return ``(name, raw, weight, weighted)`` for each score term of ``candidate``."""
        return [
            (w.name, raw, w.weight, raw * w.weight)
            for w, raw in zip(self.score_weights, candidate.score_terms, strict=False)
        ]
