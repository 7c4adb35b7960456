"""A routing policy file: the seed's routing matrix and/or a routing DSL, with its own test cases.

::

    routing_matrix:                      # seed 000, as written
      - rule_name: "long_context_priority"
        condition: "input_length > 8000 || contains_legal_terms(prompt)"
        primary_target: "deepseek-v4-32k"
        fallback_chain: ["deepseek-coder-6b-fp16", "legacy-rule-engine"]
        cost_params: {base_weight: 1.5, surge_multiplier: 2.0}
        throttle_config: {max_rps: 50, burst_window: 10s}
    routing_dsl: |                       # seed 003 §5.4, as written (after the matrix's rules)
      IF intent == "legal" AND file_type == "pdf" THEN route_to("qwen-vl") WITH timeout=8000ms
    degraded_targets:                    # what a chain may name besides models
      legacy-rule-engine: {url: "http://127.0.0.1:9300"}   # or {canned: "..."}
    model_fallbacks: {deepseek-v4-32k: [deepseek-coder-6b-fp16]}   # when a rule names no chain
    term_lists: {legal_terms: [...]}     # contains_<name>(prompt), over the config's lists
    timezone: Asia/Shanghai              # where the rules' hours are read (default: routing.timezone)
    tests:                               # routelens policy test FILE
      - name: long input goes to the 32k model
        request: {input_length: 9000}
        expect: {rule: long_context_priority, target: deepseek-v4-32k}

Every field here is acted on; a field the router could not act on is a load error (``extra``
fields are refused), never silently ignored.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BeforeValidator, Field, field_validator, model_validator

from schemas.common import ContractModel, Language
from schemas.units import ZoneName, parse_bytes, parse_duration

__all__ = ["CaseRequest", "DegradedSpec", "MatrixRule", "PolicyCase", "PolicyFileSpec", "PRIORITIES"]

Seconds = Annotated[float, BeforeValidator(parse_duration)]
Bytes = Annotated[int, BeforeValidator(parse_bytes)]
PRIORITIES = {"low": 0, "normal": 1, "high": 2}
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"


class CostParamsSpec(ContractModel):
    """Scale of the cost term for a rule's requests (``surge_multiplier`` applies in peak hours)."""

    base_weight: float = Field(1.0, gt=0, le=100)
    surge_multiplier: float = Field(1.0, gt=0, le=100)


class ThrottleSpec(ContractModel):
    """A token bucket: ``max_rps`` refill, ``max_rps * burst_window`` capacity; what overflow does."""

    max_rps: float = Field(gt=0, le=1e6)
    burst_window: Seconds = Field(1.0, gt=0, le=3600)
    overflow: Literal["chain", "reject", "wait"] = "chain"
    max_wait: Seconds = Field(1.0, ge=0, le=60, description="For overflow: wait, the longest wait for a token.")
    bucket: str | None = Field(None, pattern=NAME, description="Share one bucket among the rules naming it.")


class GuaranteeSpec(ContractModel):
    """Free resources an instance must have to take the rule's requests."""

    min_gpu_mem: Bytes | None = Field(
        None, ge=0, description="Free KV-cache memory (needs the instances' kv_cache_bytes).")
    reserved_cores: int | None = Field(
        None, ge=0, le=4096, description="Free sequence slots (the model's max_concurrency - running - queue).")

    @model_validator(mode="after")
    def _something(self) -> Self:
        if self.min_gpu_mem is None and self.reserved_cores is None:
            raise ValueError("resource_guarantee needs min_gpu_mem or reserved_cores")
        return self


class TimeoutSpec(ContractModel):
    """The per-attempt timeout and the pause before the next attempt."""

    initial_timeout: Seconds = Field(gt=0, le=600)
    retry_backoff: Seconds = Field(0.0, ge=0, le=60)


class MatrixRule(ContractModel):
    """One entry of ``routing_matrix``, in the seed's field names."""

    rule_name: str = Field(pattern=NAME)
    condition: str | None = Field(None, description="The condition language; none: the rule always applies.")
    primary_target: str | None = Field(None, description="A model; none: every model, scored as usual.")
    fallback_chain: list[str] = []
    cost_params: CostParamsSpec | None = None
    throttle_config: ThrottleSpec | None = None
    priority: Literal["low", "normal", "high"] | Annotated[int, Field(ge=0, le=100)] = "normal"
    resource_guarantee: GuaranteeSpec | None = None
    timeout_policy: TimeoutSpec | None = None

    @property
    def priority_level(self) -> int:
        """``low`` = 0, ``normal`` = 1, ``high`` = 2, or the number given."""
        return PRIORITIES[self.priority] if isinstance(self.priority, str) else self.priority


class DegradedSpec(ContractModel):
    """A non-LLM target: a responder URL answering the chat request OpenAI-shaped, or a canned answer."""

    url: str | None = Field(None, pattern=r"^https?://")
    canned: str | None = Field(None, min_length=1, max_length=10_000)

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.url is None) == (self.canned is None):
            raise ValueError("a degraded target has exactly one of url and canned")
        return self


class CaseRequest(ContractModel):
    """The request features of a policy test case (what conditions read)."""

    input_length: int = Field(0, ge=0)
    query_length: int | None = Field(None, ge=0, description="Default: input_length.")
    language: Language = Field(Language.EN, description="What the analyser gives: zh, en, mixed or unknown.")
    intent: str | None = None
    intent_confidence: float | None = Field(None, ge=0, le=1)
    file_types: list[str] = []
    has_attachments: bool | None = Field(None, description="Default: whether file_types is non-empty.")
    request_time: datetime = Field(default_factory=lambda: datetime(2026, 6, 1, 10, 0, tzinfo=UTC),
                                   description="A time without a zone is UTC.")
    headers: dict[str, str] = {}
    metadata: dict[str, Any] = {}
    prompt: str = Field("", max_length=100_000)
    keyword_score: float | None = None

    @field_validator("request_time")
    @classmethod
    def _naive_is_utc(cls, value: datetime) -> datetime:
        # Not the machine's zone: a case must match the same rule on every machine.
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class CaseExpect(ContractModel):
    """What a case expects: the rule (None: no rule matches) and the primary target."""

    rule: str | None
    target: str | None = None


class PolicyCase(ContractModel):
    """One test case a policy file carries."""

    name: str = Field(min_length=1, max_length=200)
    request: CaseRequest = CaseRequest()
    expect: CaseExpect


class PolicyFileSpec(ContractModel):
    """The whole policy file."""

    routing_matrix: list[MatrixRule] = []
    routing_dsl: str | None = Field(None, max_length=200_000)
    degraded_targets: dict[str, DegradedSpec] = {}
    model_fallbacks: dict[str, list[str]] = {}
    term_lists: dict[str, list[str]] = {}
    timezone: ZoneName | None = Field(None, description="Where the rules' hours are read (default: routing.timezone).")
    tests: list[PolicyCase] = []


    @model_validator(mode="after")
    def _some_rules(self) -> Self:
        if not self.routing_matrix and not (self.routing_dsl or "").strip():
            raise ValueError("a policy file needs routing_matrix or routing_dsl")
        names = [r.rule_name for r in self.routing_matrix]
        if dup := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"rule_name used twice: {', '.join(dup)}")
        return self
