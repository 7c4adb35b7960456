"""The ``shared:`` and ``throttles:`` sections: where replicas share state, and the request guards.

::

    shared:
      backend: redis                      # memory (one process, the default) | redis (replicas share)
      url: redis://127.0.0.1:6379/0
      key_prefix: "routelens:"            # every key and channel; several deployments on one Redis
      timeout_ms: 50                      # bound of every Redis call; past it, local state answers

    throttles:
      client:                             # a token bucket per client key
        rate: 5                           # tokens a second
        burst: 10
        key: [authorization, "header:x-tenant", address]   # the first the request has names the client
      shedding:                           # one bucket for every client; shed by priority near empty
        rate: 200
        burst: 400
        priority_header: x-priority       # high | normal | low (absent or unknown: normal)
        reserve: {high: 0.0, normal: 0.1, low: 0.3}         # share of burst kept for higher priorities
      prefilter:                          # obviously malicious prompts: 400 before any analysis
        patterns:
          - {name: prompt-injection, regex: "(?i)ignore (all )?(previous|prior) instructions"}
        max_chars: 200000                 # the prompt text scanned (the rest is not)
        repetition: {min_chars: 4096, max_ratio: 20}        # zlib ratio above which text is repetition

A refused request gets an OpenAI-shaped 429 with ``Retry-After`` (throttles) or 400 with the
reason (prefilter), and its trace. With ``shared.backend: redis`` the buckets are Redis's, so every
replica draws from the same ones (the routing policy's per-rule buckets too).
"""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from schemas.common import ContractModel

__all__ = [
    "ClientThrottle",
    "PrefilterPattern",
    "PrefilterSettings",
    "Repetition",
    "SharedSettings",
    "SheddingThrottle",
    "ThrottleSettings",
]

KEY_SOURCE = re.compile(r"^(authorization|address|header:[A-Za-z0-9][A-Za-z0-9_-]{0,63})$")
PRIORITIES = ("high", "normal", "low")


class SharedSettings(ContractModel):
    """Where gateway replicas share breakers, budgets, throttles and affinity bindings."""

    backend: Literal["memory", "redis"] = Field("memory", description="memory: this process only; redis: shared.")
    url: str = Field("redis://127.0.0.1:6379/0", description="redis://[user:password@]host:port/db.")
    key_prefix: str = Field("routelens:", min_length=1, max_length=64, description="Prefix of keys and channels.")
    timeout_ms: float = Field(50.0, gt=0, le=5000, description="Bound of every Redis call.")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value


class ClientThrottle(ContractModel):
    """A token bucket per client: ``rate`` tokens a second up to ``burst``."""

    rate: float = Field(gt=0, description="Tokens a second per client key.")
    burst: float = Field(ge=1, description="Bucket size (requests a client may send at once).")
    key: list[str] = Field(default=["authorization", "address"],
                           description="Sources of the client key, first present wins: authorization "
                                       "(the bearer token, hashed), header:<name>, address.")

    @field_validator("key", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("key")
    @classmethod
    def _sources(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one key source")
        for source in value:
            if not KEY_SOURCE.match(source):
                raise ValueError(f"{source!r} is not authorization, address or header:<name>")
        return [s.lower() for s in value]


class SheddingThrottle(ContractModel):
    """One bucket for all clients; as it empties, lower priorities are shed first."""

    rate: float = Field(gt=0, description="Tokens a second for the whole gateway (every replica).")
    burst: float = Field(ge=1)
    priority_header: str = Field("x-priority", pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    reserve: dict[Literal["high", "normal", "low"], float] = Field(
        default={"high": 0.0, "normal": 0.1, "low": 0.3},
        description="Share of burst a priority may not take (kept for the higher ones).")

    @field_validator("reserve")
    @classmethod
    def _shares(cls, value: dict[str, float]) -> dict[str, float]:
        for name, share in value.items():
            if not 0.0 <= share < 1.0:
                raise ValueError(f"reserve of {name} must be in [0, 1)")
        full = {"high": 0.0, "normal": 0.1, "low": 0.3, **value}
        if not full["high"] <= full["normal"] <= full["low"]:
            raise ValueError("reserves must not decrease from high to normal to low")
        return full


class PrefilterPattern(ContractModel):
    """A regular expression over the prompt text; a match is a 400 naming ``name``."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        return value


class Repetition(ContractModel):
    """Huge repetition: text of ``min_chars`` or more that zlib shrinks more than ``max_ratio`` times."""

    min_chars: int = Field(4096, ge=64)
    max_ratio: float = Field(20.0, gt=1)


class PrefilterSettings(ContractModel):
    """Obviously malicious requests, refused before analysis."""

    patterns: list[PrefilterPattern] = []
    max_chars: int = Field(200_000, ge=1, description="Prompt characters scanned (the rest is not).")
    repetition: Repetition | None = Repetition()

    @model_validator(mode="after")
    def _unique(self) -> Self:
        names = [p.name for p in self.patterns]
        if len(names) != len(set(names)):
            raise ValueError("pattern names must be unique")
        return self


class ThrottleSettings(ContractModel):
    """Request guards that run before analysis: the client and shedding buckets, then the prefilter.

    A flood is refused for the price of a token take, and a refused request counts against its bucket too.
    """

    client: ClientThrottle | None = None
    shedding: SheddingThrottle | None = None
    prefilter: PrefilterSettings | None = None

    @property
    def active(self) -> bool:
        """Whether any guard is configured."""
        return self.client is not None or self.shedding is not None or self.prefilter is not None
