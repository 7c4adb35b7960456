"""The ``economics:`` section: the router's own breakers, degraded modes, session affinity, budgets.

::

    economics:
      router_modes:              # seed 003 §4.3: the router protects itself
        slow_ms: 50              # 5 decisions in a row slower than this -> static mode
        slow_count: 5
        fast_ms: 20              # ... until 3 in a row are faster than this
        fast_count: 3
        static_weights: {llama-3-8b: 3, qwen-72b: 1}   # round-robin weights per model (default 1)
        safe_model: llama-3-8b   # the most stable model (None: safe mode never engages)
        misroute_enter: 0.30     # misroute share of feedback above this for misroute_enter_s -> safe
        misroute_enter_s: 60
        misroute_exit: 0.05      # ... until below this for misroute_exit_s
        misroute_exit_s: 300
      degraded:                  # seed 000: when no target is feasible (router.on_empty: reject), in order
        steps: [shed_features, cap_max_tokens, cache, responder, reject]
        max_tokens_floor: 64
        cache: {enabled: false, ttl_s: 60, max_entries: 1000}
        responder: {name: rules-engine, url: http://127.0.0.1:9100/v1/chat/completions}
      affinity:                  # seed 000: a session stays on its instance
        header: x-ticket-id
        metadata_field: ticket_id
        load_factor: 1.25        # consistent hashing with bounded loads (c)
        ttl_s: 1800
      budgets:                   # seed 002 §5.1 problem 3: tiered budgets per time band
        timezone: Asia/Shanghai
        bands:
          - {name: peak, hours: [[9, 12], [14, 18]], models: [qwen-72b], max_share: 0.05}
          - {name: off-peak, hours: [[0, 24]], models: [qwen-72b], max_share: 0.10}

Every section is off (or inert) unless configured: no ``safe_model`` means no safe mode, no
``bands`` no budgets, no ``header``/``metadata_field`` no affinity, and the answer cache is off.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from schemas.common import ContractModel
from schemas.config.routing import HourRange
from schemas.units import ZoneName

__all__ = [
    "DEGRADE_STEPS",
    "AffinitySettings",
    "AnswerCacheSettings",
    "BudgetBand",
    "BudgetSettings",
    "DegradeStep",
    "DegradedSettings",
    "EconomicsSettings",
    "ResponderSettings",
    "RouterModeSettings",
]

DegradeStep = Literal["shed_features", "cap_max_tokens", "cache", "responder", "reject"]
DEGRADE_STEPS: tuple[DegradeStep, ...] = ("shed_features", "cap_max_tokens", "cache", "responder", "reject")


class RouterModeSettings(ContractModel):
    """The router's breakers on itself: slow decisions -> static mode, misroutes -> safe mode."""

    enabled: bool = True
    slow_ms: float = Field(50.0, gt=0, le=10_000)
    slow_count: int = Field(5, ge=1, le=1000)
    fast_ms: float = Field(20.0, gt=0, le=10_000)
    fast_count: int = Field(3, ge=1, le=1000)
    static_weights: dict[str, int] = Field(default={}, description="Round-robin weight per model (default 1).")
    safe_model: str | None = Field(None, description="The most stable model; None: safe mode never engages.")
    misroute_enter: float = Field(0.30, gt=0, le=1)
    misroute_enter_s: float = Field(60.0, gt=0, le=86_400)
    misroute_exit: float = Field(0.05, ge=0, lt=1)
    misroute_exit_s: float = Field(300.0, gt=0, le=86_400)
    misroute_window_s: float = Field(60.0, gt=0, le=86_400, description="The misroute share's sliding window.")
    min_feedback: int = Field(10, ge=1, le=100_000, description="Verdicts in the window before the share counts.")

    @field_validator("static_weights")
    @classmethod
    def _weights(cls, value: dict[str, int]) -> dict[str, int]:
        for model, weight in value.items():
            if not 1 <= weight <= 100:
                raise ValueError(f"the weight of {model!r} must be 1-100 (got {weight})")
        return value

    @model_validator(mode="after")
    def _bands(self) -> Self:
        if self.fast_ms > self.slow_ms:
            raise ValueError("fast_ms must be at most slow_ms")
        if self.misroute_exit >= self.misroute_enter:
            raise ValueError("misroute_exit must be below misroute_enter")
        return self


class AnswerCacheSettings(ContractModel):
    """A short-lived, memory-only cache of recent answers by model, normalised question and earlier turns."""

    enabled: bool = False
    ttl_s: float = Field(60.0, gt=0, le=3 * 86_400)
    max_entries: int = Field(1000, ge=1, le=1_000_000)


class ResponderSettings(ContractModel):
    """A non-LLM responder: an OpenAI-shaped URL or a canned answer (exactly one)."""

    name: str = Field("responder", min_length=1, max_length=64)
    url: str | None = None
    canned: str | None = Field(None, max_length=10_000)

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.url is None) == (self.canned is None):
            raise ValueError("a responder has exactly one of url and canned")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return self


class DegradedSettings(ContractModel):
    """What the gateway tries, in order, when a request has no feasible target (with ``router.on_empty: reject``)."""

    steps: list[DegradeStep] = Field(default=["reject"], min_length=1)
    max_tokens_floor: int = Field(64, ge=1, le=1_000_000, description="cap_max_tokens never goes below this.")
    max_tokens_ceiling: int = Field(1024, ge=1, le=1_000_000, description="The cap with no load.")
    cache: AnswerCacheSettings = AnswerCacheSettings()
    responder: ResponderSettings | None = None

    @model_validator(mode="after")
    def _steps(self) -> Self:
        if len(set(self.steps)) != len(self.steps):
            raise ValueError("each degraded step may appear once")
        if "reject" in self.steps and self.steps[-1] != "reject":
            raise ValueError("reject must be the last step")
        if "responder" in self.steps and self.responder is None:
            raise ValueError("the responder step needs degraded.responder")
        if self.max_tokens_floor > self.max_tokens_ceiling:
            raise ValueError("max_tokens_floor must be at most max_tokens_ceiling")
        return self


class AffinitySettings(ContractModel):
    """Sessions bound to instances: MurmurHash3 on a ring, loads bounded by ``load_factor``."""

    header: str | None = Field(None, min_length=1, max_length=128)
    metadata_field: str | None = Field(None, min_length=1, max_length=128)
    load_factor: float = Field(1.25, ge=1.0, le=10.0, description="c of consistent hashing with bounded loads.")
    vnodes: int = Field(64, ge=1, le=1024, description="Ring points per instance.")
    ttl_s: float = Field(1800.0, gt=0, le=30 * 86_400)

    @property
    def is_enabled(self) -> bool:
        """True when a session key is read from anywhere."""
        return self.header is not None or self.metadata_field is not None


class BudgetBand(ContractModel):
    """One time band's budget on a set of (expensive) models: a call share or a spend per window."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    hours: list[HourRange] = Field(
        min_length=1, description="[start, end) local hours of budgets.timezone: start 0-23, end 0-24 (24: midnight); "
        "start > end wraps midnight. The first band whose hours hold the request's time wins.")
    models: list[str] = Field(default=[], description="The models this budget governs (empty: every model).")
    max_share: float | None = Field(None, gt=0, le=1, description="Calls to the models / all calls.")
    max_spend: float | None = Field(
        None, gt=0, le=1e12,
        description="Spend per window in the fleet's cost units: the requests' cost as fleet.instances[].cost "
        "prices them (base, tokens).")
    window_s: float = Field(
        3600.0, ge=1, le=86_400, description="The budget's window, in local time of budgets.timezone: 86400 is the "
        "local day (from local midnight, 23 or 25 h on a DST day); a shorter one must divide a day in whole seconds "
        "and starts at local midnight + k * window_s of wall time.")
    min_calls: int = Field(100, ge=1, le=10_000_000, description="A share is of at least this many calls.")

    @field_validator("window_s")
    @classmethod
    def _divides_a_day(cls, value: float) -> float:
        if value != int(value) or 86_400 % int(value):
            raise ValueError(f"{value:g} s does not divide a day: windows start at local midnight, so window_s is "
                             "a whole number of seconds dividing 86400 (e.g. 900, 3600, 21600, 86400)")
        return value

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.max_share is None) == (self.max_spend is None):
            raise ValueError("a band has exactly one of max_share and max_spend")
        return self


class BudgetSettings(ContractModel):
    """Tiered budgets; the cost weight rises from ``ramp_from`` of a budget to ``max_factor`` at it."""

    timezone: ZoneName = Field(
        "UTC", description="IANA zone of the bands' hours and of the windows: a window of a day resets at local "
        "midnight, shorter ones at local midnight + k * window_s.")
    bands: list[BudgetBand] = []
    ramp_from: float = Field(0.5, ge=0, lt=1, description="Budget use where the cost weight starts rising.")
    max_factor: float = Field(4.0, ge=1, le=100, description="The cost weight's multiplier at the budget.")
    refresh_s: float = Field(1.0, gt=0, le=600, description="How often shared spend counters are re-read.")


    @field_validator("bands")
    @classmethod
    def _names(cls, value: list[BudgetBand]) -> list[BudgetBand]:
        names = [b.name for b in value]
        if len(set(names)) != len(names):
            raise ValueError("band names must be unique")
        return value


class EconomicsSettings(ContractModel):
    """Router breakers, degraded modes, affinity and budgets (see the module docstring)."""

    router_modes: RouterModeSettings = RouterModeSettings()
    degraded: DegradedSettings = DegradedSettings()
    affinity: AffinitySettings = AffinitySettings()
    budgets: BudgetSettings = BudgetSettings()
