"""Instances: what the configuration declares, and what live state says about them."""

from __future__ import annotations

from typing import Annotated, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, field_validator, model_validator

from schemas.common import ContractModel, MaybeUtcTime, ProbeKind
from schemas.probe import ProbeStatus
from schemas.units import parse_bytes

__all__ = ["ENGINES", "EXTERNAL", "CostSpec", "Engine", "InstanceProbes", "InstanceSnapshot", "InstanceSpec",
           "LatchState"]

# What serves an instance. The first four are scraped at /metrics (router_core.state.parse reads
# each one's names); an "external" server has no /metrics (a hosted OpenAI-compatible API, or an
# engine RouteLens does not parse): it is never scraped and is judged by what the gateway sees.
Engine = Literal["vllm", "sglang", "tgi", "llamacpp", "external"]
ENGINES: tuple[str, ...] = get_args(Engine)
EXTERNAL = "external"

_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


class CostSpec(ContractModel):
    """Price of one request on a model (the seed's cost table), and of its tokens (a provider's price list).

    A request's price is `base`, plus its prompt tokens at `input_per_1m` and its completion tokens
    at `output_per_1m` (per million), all times `surge_multiplier` when the request's time falls in
    `routing.peak_hours` (local hours in `routing.timezone`; the time is the request's own, a
    trace's `ts` in a replay). Before the answer the tokens are expected ones: the request's
    estimated input, and `expected_output_tokens` (at most its `max_tokens`); that price is what the
    cost scorer compares across the pool. Once answered, the answer's `usage` prices it: what the
    trace records as the outcome's cost and what budgets' `max_spend` counts. Token prices 0 (the
    default): every request costs its per-request price, as the seed's table.
    """

    base: float = Field(1.0, ge=0, description="Cost of one request outside peak hours (tokens aside).")
    surge_multiplier: float = Field(
        1.0, ge=1, description="Peak-hour premium factor: in routing.peak_hours a request costs this times its "
        "off-peak price.")
    input_per_1m: float = Field(0.0, ge=0, description="Price of a million prompt tokens, added to base.")
    output_per_1m: float = Field(0.0, ge=0, description="Price of a million completion tokens, added to base.")
    expected_output_tokens: int = Field(
        256, ge=0, description="Completion tokens a request is priced at before it is answered (at most its "
        "max_tokens): the cost scorer's and the budgets' estimate with output_per_1m.")

    @property
    def per_token(self) -> bool:
        """Whether tokens are priced (else a request costs its per-request price whatever it holds)."""
        return self.input_per_1m > 0 or self.output_per_1m > 0


class InstanceProbes(ContractModel):
    """Fewer or rarer probes for one instance than the ``probes`` section gives every other one.

    ``probes: false`` on the instance is short for ``{enabled: false}``: it is never probed (so it
    has no probe verdicts, which hold no instance out). A mapping gives ``kinds`` (some of
    ``probes.kinds``) and/or ``interval_s`` (at least ``probes.interval_s``, rounded up to whole
    rounds of it); a prober given more than the ``probes`` section allows refuses to start.
    """

    enabled: bool = Field(True, description="False: never probed (what 'probes: false' means).")
    kinds: list[ProbeKind] | None = Field(
        None, min_length=1, description="The probe kinds this instance gets, some of probes.kinds (default: all).")
    interval_s: float | None = Field(
        None, gt=0, description="How often, at least probes.interval_s; rounded up to whole rounds of it "
        "(default: probes.interval_s).")

    @model_validator(mode="after")
    def _meaningful(self) -> InstanceProbes:
        if self.kinds is not None and len(set(self.kinds)) != len(self.kinds):
            raise ValueError(f"kinds names a kind twice: {[k.value for k in self.kinds]}")
        given = self.kinds is not None or self.interval_s is not None
        if not self.enabled and given:
            raise ValueError("an instance that is not probed takes no kinds or interval_s")
        if self.enabled and not given:
            raise ValueError("give kinds and/or interval_s, or 'probes: false' for no probes at all")
        return self

    def problems(self, kinds: list[ProbeKind], interval_s: float) -> list[str]:
        """What this override asks beyond the ``probes`` section (its ``kinds`` and ``interval_s``): [] if nothing."""
        out = []
        extra = [k.value for k in self.kinds or () if k not in kinds]
        if extra:
            out.append(f"kinds {extra} not in probes.kinds {[k.value for k in kinds]}: an instance gets fewer "
                       "probes than the others, never more")
        if self.interval_s is not None and self.interval_s < interval_s:
            out.append(f"interval_s {self.interval_s:g} is shorter than probes.interval_s {interval_s:g}: an "
                       "instance is probed less often than the others, never more")
        return out


def _probes_switch(value: object) -> object:
    """``probes: false`` is ``{enabled: false}``; ``probes: true`` (what no ``probes`` means) is refused."""
    if value is False:
        return {"enabled": False}
    if value is True:
        raise ValueError("probes: true is the default: leave it out, or give false or a mapping (kinds, interval_s)")
    return value


class InstanceSpec(ContractModel):
    """One model instance as declared in the fleet configuration."""

    id: str = Field(pattern=_ID_PATTERN)
    model: str = Field(min_length=1, max_length=200)
    upstream_model: str | None = Field(
        None, min_length=1, max_length=200,
        description="The model name sent upstream (a provider's own name for it); default: `model`.")
    url: str = Field(description="Base URL of the OpenAI-compatible server, without /v1 (the gateway adds "
                     "/v1/chat/completions).")
    zone: str = "local"
    engine: Engine = Field(
        "vllm", description="What serves it: vllm, sglang, tgi or llamacpp (scraped at /metrics), or external: a "
        "server without /metrics (e.g. a hosted API), never scraped and judged by what the gateway itself sees "
        "(its own in-flight requests as the queue, latency and errors from its observation window).")
    context_window: int = Field(32768, gt=0)
    cost: CostSpec = CostSpec()
    version: str | None = Field(None, pattern=r"^\d+(\.\d+)*$", description="Model build version, e.g. '2.1'.")
    api_key_env: str | None = Field(
        None, description="Environment variable with the key sent upstream as 'Authorization: Bearer' (vLLM --api-key)."
    )
    features: list[str] = Field(
        default=[], description="What the instance's engine offers (e.g. flash-attn), for rules that require it.")
    kv_cache_bytes: Annotated[int, BeforeValidator(parse_bytes)] | None = Field(
        None, ge=0, description="KV-cache memory the engine reserved (e.g. 24GB), for resource guarantees.")
    probes: Annotated[InstanceProbes | None, BeforeValidator(_probes_switch)] = Field(
        None, description="false: never probed; or a mapping with kinds (some of probes.kinds) and/or interval_s "
        "(at least probes.interval_s) for fewer or rarer probes (a paid provider). Default: as the probes section.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        value = value.rstrip("/")
        if urlsplit(value).path.endswith("/v1"):
            raise ValueError(f"{value!r} ends in /v1: give the base URL without /v1 (the gateway adds "
                             "/v1/chat/completions)")
        return value


class LatchState(ContractModel):
    """Where one hard constraint's hysteresis latch stands for one instance.

    ``out`` is True while the instance is held out of the feasible set: it went out after the
    metric broke the threshold for ``exit_for_s`` and comes back only after staying below the
    lower ``enter_below`` for ``enter_for_s``.
    """

    constraint: str
    out: bool
    since: MaybeUtcTime = Field(None, description="When the latch last changed; one that never did: when its "
                                "gateway process began (None: a producer that does not date latches).")
    value: float | None = Field(None, description="The metric value at the last evaluation.")


class InstanceSnapshot(ContractModel):
    """The state of one instance as the router saw it at decision time.

    Gauges are None when the engine does not expose them or no scrape has succeeded; the router
    treats a missing gauge pessimistically. Snapshots are rebuilt when state changes (each scrape
    round), not per request; the age of the data at decision time is ``trace.ts - scraped_at``.
    """

    instance: str
    model: str
    scraped_at: MaybeUtcTime = None
    age_s: float | None = Field(None, ge=0, description="Seconds since the last good scrape.")
    stale: bool = False
    engine: str | None = None
    queue: float | None = Field(None, ge=0, description="Requests waiting (vllm:num_requests_waiting).")
    running: float | None = Field(None, ge=0, description="Requests running.")
    kv_cache_usage: float | None = Field(None, ge=0, le=1, description="KV-cache usage, 0-1.")
    warmup_progress: float | None = Field(None, ge=0, le=1, description="Warm-up progress, 0-1 (see warmup_source).")
    warmup_source: Literal["gauge", "uptime", "assumed"] | None = Field(
        None, description="Where warmup_progress came from: the engine's warm-up gauge; its process uptime over "
        "scrape.warmup_s (process_start_time_seconds); or assumed warm, 1.0, as it reports neither. "
        "None: no scrape yet.")
    error_rate: float | None = Field(None, ge=0, le=1, description="Router-observed error share (window).")
    p50_latency_ms: float | None = Field(None, ge=0, description="Router-observed latency, window median.")
    p95_latency_ms: float | None = Field(None, ge=0, description="Router-observed latency, window p95.")
    window_requests: int = Field(0, ge=0, description="Requests the router sent in the window.")
    ttft_p95_ms: float | None = Field(None, ge=0, description="Engine TTFT p95 since the previous scrape.")
    e2e_p95_ms: float | None = Field(None, ge=0, description="Engine end-to-end p95 since the previous scrape.")
    scrape_error: str | None = None
    latches: list[LatchState] = []
    probes: list[ProbeStatus] = Field([], description="Probe verdicts (hysteresis) per kind, when probed.")
