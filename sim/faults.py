"""Faults of one simulated instance: what can be injected, and the book of when each started and ended.

:class:`FaultBook` is pure bookkeeping over an injected clock: it answers "which faults are active
now" and the effect queries the instance needs (latency factor, leaked KV share, ...), and it
reports each start and end, with exact times, to a listener (the fleet's fault log).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from schemas.common import ContractModel
from sim.clock import Clock

__all__ = ["DEFAULT_LEAK_RATE", "DEFAULT_PRESSURE", "PROCESS_STATE_KINDS", "FaultBook", "FaultKind", "FaultRecord",
           "FaultSpec"]


class FaultKind(StrEnum):
    """The ways an instance can misbehave (``flap`` is the drills' oscillating KV usage).

    ``kv-pressure`` is load the router does not send: a neighbour (a batch job on the same GPU, a
    tenant calling the instance directly) holds KV blocks, rising to ``rate`` of the cache and
    falling back, so the routed requests queue behind it and the gauges show it.

    ``invalid-utf8-metrics`` serves ``/metrics`` with a byte that is not UTF-8 in every label
    set; ``out-of-range-metrics`` serves impossible gauges (a negative queue, a NaN running count,
    KV usage 1.7). Both last until cleared (or ``duration_s``); a restart does not cure them.
    """

    CRASH = "crash"
    HANG = "hang"
    SLOW = "slow"
    ERROR = "error"
    RATELIMIT = "ratelimit"
    DRIFT = "drift"
    GARBAGE = "garbage"
    LEAK = "leak"
    FREEZE_METRICS = "freeze-metrics"
    RESTART = "restart"
    FLAP = "flap"
    INVALID_UTF8_METRICS = "invalid-utf8-metrics"
    OUT_OF_RANGE_METRICS = "out-of-range-metrics"
    KV_PRESSURE = "kv-pressure"


_PROBABILITY_KINDS = {FaultKind.ERROR, FaultKind.RATELIMIT, FaultKind.DRIFT, FaultKind.GARBAGE, FaultKind.FLAP,
                      FaultKind.KV_PRESSURE}
PROCESS_STATE_KINDS = frozenset({FaultKind.LEAK, FaultKind.FREEZE_METRICS})  # a restart cures these
DEFAULT_LEAK_RATE = 0.2  # share of the KV cache leaked per minute
DEFAULT_PRESSURE = 0.95  # kv-pressure: the share of the KV cache the neighbour holds at its peak
_MAX_HELD = 0.98  # leak and pressure together never hold the whole cache


class FaultSpec(ContractModel):
    """One fault to inject (``POST /admin/faults`` body, or a scenario timeline entry's parameters).

    ``rate``: probability per request for error, ratelimit, drift and garbage (default 1); share of
    the KV cache leaked per minute for leak (default 0.2); KV usage reported in the high half of
    each period for flap (default 0.95); peak share of the KV cache held for kv-pressure
    (default 0.95). ``factor``: latency multiplier for slow (default 5).
    ``duration_s``: wall seconds until it ends by itself (None: until cleared); for restart, the
    downtime (default 0.5). ``lag_s``: freeze-metrics serves metrics this old instead of frozen.
    ``period_s``: for kv-pressure, the seconds it takes to rise to its peak and, before
    ``duration_s`` ends, to fall back (a gradual fall shows the KV constraint's hysteresis).
    """

    kind: FaultKind
    rate: float | None = Field(None, ge=0)
    factor: float | None = Field(None, ge=1)
    duration_s: float | None = Field(None, gt=0)
    lag_s: float | None = Field(None, gt=0)
    period_s: float = Field(10.0, gt=0, description="flap: seconds per high+low cycle; kv-pressure: rise and fall.")
    retry_after_s: int = Field(1, ge=0, description="ratelimit: the Retry-After header.")

    @model_validator(mode="after")
    def _rate_is_a_probability(self) -> FaultSpec:
        if self.kind in _PROBABILITY_KINDS and self.rate is not None and self.rate > 1:
            raise ValueError(f"rate is a probability for {self.kind.value} and must be <= 1")
        return self


@dataclass
class FaultRecord:
    """One injected fault: when it started and ended (Unix seconds) and what it touched."""

    id: str
    instance: str
    spec: FaultSpec
    started_at: float
    started_mono: float
    ended_at: float | None = None
    end_reason: str | None = None
    requests_seen: int = 0
    requests_affected: int = 0

    @property
    def kind(self) -> FaultKind:
        """The fault's kind."""
        return self.spec.kind

    def to_json(self) -> dict[str, object]:
        """The record as served by ``/admin/faults`` and written to the fault log."""
        return {"id": self.id, "instance": self.instance, "kind": self.kind.value,
                "spec": self.spec.model_dump(mode="json", exclude_none=True), "started_at": self.started_at,
                "ended_at": self.ended_at, "end_reason": self.end_reason, "requests_seen": self.requests_seen,
                "requests_affected": self.requests_affected}


Listener = Callable[[Literal["start", "end"], FaultRecord], None]


class FaultBook:
    """Active and past faults of one instance (``history`` holds every fault started, active or ended).

    Args:
        instance: The instance id, copied into records.
        clock: Wall clock (monotonic and epoch).
        on_event: Called with ``("start" | "end", record)``.
    """

    def __init__(self, instance: str, clock: Clock, on_event: Listener | None = None) -> None:
        self.instance = instance
        self.clock = clock
        self.on_event = on_event
        self.history: list[FaultRecord] = []
        self._active: list[FaultRecord] = []
        self._seq = itertools.count(1)

    def inject(self, spec: FaultSpec) -> FaultRecord:
        """Start ``spec`` now and return its record."""
        record = FaultRecord(f"f{next(self._seq)}", self.instance, spec, self.clock.epoch(), self.clock.now())
        self._active.append(record)
        self.history.append(record)
        if self.on_event is not None:
            self.on_event("start", record)
        return record

    def end(self, record: FaultRecord, reason: str, at_mono: float | None = None) -> None:
        """End one active fault at ``at_mono`` (now by default); ending twice does nothing."""
        if record not in self._active:
            return
        now = self.clock.now()
        at = now if at_mono is None else min(at_mono, now)
        record.ended_at = self.clock.epoch() - (now - at)
        record.end_reason = reason
        self._active.remove(record)
        if self.on_event is not None:
            self.on_event("end", record)

    def expire(self) -> list[FaultRecord]:
        """End every fault whose duration has run out, dated when it was due; return them."""
        now = self.clock.now()
        due = [r for r in self._active if r.spec.duration_s is not None
               and r.kind is not FaultKind.RESTART and now >= r.started_mono + r.spec.duration_s]
        for record in due:
            self.end(record, "duration", record.started_mono + (record.spec.duration_s or 0.0))
        return due

    def active(self, kind: FaultKind | None = None) -> list[FaultRecord]:
        """Active faults, all or of one kind (call :meth:`expire` first)."""
        return [r for r in self._active if kind is None or r.kind is kind]

    def ended(self) -> list[FaultRecord]:
        """Faults that have ended, in the order they started (an active one is in :meth:`active` only)."""
        return [r for r in self.history if r.ended_at is not None]

    def by_id(self, fault_id: str) -> FaultRecord | None:
        """The record with ``fault_id``, active or past."""
        return next((r for r in self.history if r.id == fault_id), None)

    def slow_factor(self) -> float:
        """Latency multiplier from slow faults and the leak (1 when healthy)."""
        factor = 1.0
        for record in self.active(FaultKind.SLOW):
            factor *= record.spec.factor or 5.0
        return factor * (1.0 + 4.0 * self.leak_fraction())

    def leak_fraction(self) -> float:
        """Share of the KV cache lost to leaks: ``rate`` per minute since onset, at most 0.9."""
        now = self.clock.now()
        leaked = sum((r.spec.rate if r.spec.rate is not None else DEFAULT_LEAK_RATE) * (now - r.started_mono) / 60.0
                     for r in self.active(FaultKind.LEAK))
        return min(0.9, leaked)

    def pressure_fraction(self) -> float:
        """Share of the KV cache kv-pressure faults hold now: up over ``period_s``, held, down before the end."""
        now, held = self.clock.now(), 0.0
        for r in self.active(FaultKind.KV_PRESSURE):
            peak, ramp = (r.spec.rate if r.spec.rate is not None else DEFAULT_PRESSURE), r.spec.period_s
            age = now - r.started_mono
            level = min(1.0, age / ramp)
            if r.spec.duration_s is not None:
                level = min(level, max(0.0, (r.spec.duration_s - age) / ramp))
            held += peak * level
        return held

    def held_fraction(self) -> float:
        """Share of the KV cache held by leaks and kv-pressure (what routed requests cannot use)."""
        return min(_MAX_HELD, self.leak_fraction() + self.pressure_fraction())

    def flap_level(self) -> float | None:
        """KV usage a flap fault reports now (its high half-period), or None."""
        now = self.clock.now()
        for record in self.active(FaultKind.FLAP):
            phase = ((now - record.started_mono) % record.spec.period_s) / record.spec.period_s
            if phase < 0.5:
                return record.spec.rate if record.spec.rate is not None else 0.95
        return None

    def probability(self, kind: FaultKind) -> tuple[float, FaultRecord | None]:
        """Combined per-request probability of a probabilistic ``kind``, and one record to charge."""
        records = self.active(kind)
        if not records:
            return 0.0, None
        miss = 1.0
        for record in records:
            miss *= 1.0 - (record.spec.rate if record.spec.rate is not None else 1.0)
        return 1.0 - miss, records[-1]
