"""Drill scenarios: a YAML file naming the fleet, the gateway's knobs, the traffic and a fault timeline.

Loaded with :func:`load_scenario`, which reports mistakes as ``file:line: field: message`` (an
unknown instance in the timeline included). :func:`run_timeline` injects the faults on time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from schemas.common import ContractModel
from schemas.config import ConstraintSpec, RouteLensConfig, ScrapeSettings
from schemas.config.sim import QueryClassName
from schemas.yamlconf import parse_yaml_model
from sim.behaviour import builtin_config
from sim.faults import DEFAULT_LEAK_RATE, FaultKind, FaultSpec
from sim.rates import RateCurve

__all__ = ["MAX_REQUESTS", "MAX_REQUESTS_LIMIT", "FaultEvent", "FleetSection", "GatewaySection", "Scenario", "SlaSpec",
           "TrafficSpec", "load_scenario", "run_timeline"]

MAX_REQUESTS = 20_000  # a run's requests by default: the schedule stops there, before its duration if need be
MAX_REQUESTS_LIMIT = 200_000


_EVEN_MIX: dict[QueryClassName, float] = {"contract": 1.0, "ticket": 1.0, "code": 1.0, "math": 1.0, "chat": 1.0}
_SEED_SLA: dict[QueryClassName, float] = {"contract": 8000.0, "ticket": 1200.0, "code": 3000.0, "math": 3000.0,
                                          "chat": 2000.0}


_MIN_SCRAPE_S = 0.05


class FleetSection(ContractModel):
    """The drill's fleet: ``instances`` of the built-in mix (instance ``i`` is model ``i % 4``)."""

    instances: int = Field(4, ge=1, le=64)
    time_scale: float = Field(1.0, gt=0)
    seed: int = 0
    warm_start: bool = True


class GatewaySection(ContractModel):
    """The gateway's knobs for the drill (the rest of its configuration is generated)."""

    max_attempts: int = Field(2, ge=1, le=10)
    upstream_timeout_s: float = Field(5.0, gt=0)
    connect_timeout_s: float = Field(0.5, gt=0)
    constraints: list[ConstraintSpec] | None = None
    scrape: ScrapeSettings = ScrapeSettings(interval_s=0.5, timeout_s=0.5, stale_after_s=3.0)


class TrafficSpec(ContractModel):
    """Open-loop traffic: a rate curve, the query mix, sessions, streaming share."""

    curve: RateCurve = RateCurve()
    mix: dict[QueryClassName, float] = Field(default_factory=lambda: _EVEN_MIX.copy())
    session_share: float = Field(0.2, ge=0, le=1, description="Share of conversations that are ticket sessions.")
    turns: tuple[int, int] = (2, 4)
    think_s: float = Field(1.0, ge=0, description="Least time between two turns of a session.")
    stream_share: float = Field(0.0, ge=0, le=1)
    concurrency: int = Field(128, ge=1, le=4096)
    timeout_s: float = Field(10.0, gt=0)
    max_requests: int = Field(MAX_REQUESTS, ge=1, le=MAX_REQUESTS_LIMIT,
                              description="Requests of a run at most: the schedule stops there (before its end "
                                          "if it holds more; sim traffic's summary says so).")
    feedback: bool = True


class SlaSpec(ContractModel):
    """Latency objectives per class (the seed: clause analysis within 8 s, tickets within 1.2 s)."""

    latency_ms: dict[QueryClassName, float] = Field(default_factory=lambda: _SEED_SLA.copy())
    default_ms: float = Field(3000.0, gt=0)

    def target_ms(self, cls: str) -> float:
        """The objective of class ``cls``."""
        return next((float(v) for k, v in self.latency_ms.items() if k == cls), self.default_ms)


class FaultEvent(FaultSpec):
    """A timeline entry: a fault spec, when (seconds from traffic start) and on which instance."""

    at_s: float = Field(ge=0)
    instance: str | int

    def spec(self) -> FaultSpec:
        """The fault without its place on the timeline."""
        return FaultSpec.model_validate(self.model_dump(exclude={"at_s", "instance"}))


class Scenario(ContractModel):
    """One drill."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str = ""
    duration_s: float = Field(gt=0, le=3600)
    fleet: FleetSection = FleetSection()
    gateway: GatewaySection = GatewaySection()
    traffic: TrafficSpec = TrafficSpec()
    sla: SlaSpec = SlaSpec()
    faults: list[FaultEvent] = []

    def instance_ids(self) -> list[str]:
        """Ids of the drill fleet's instances, in order."""
        return [spec.id for spec in self.config(0).fleet.instances]

    def instance_of(self, event: FaultEvent) -> str:
        """The instance id a timeline entry names (by id or by index)."""
        ids = self.instance_ids()
        return ids[event.instance] if isinstance(event.instance, int) else event.instance

    @model_validator(mode="after")
    def _timeline_names_real_instances(self) -> Scenario:
        ids = self.instance_ids()
        problems = []
        for i, event in enumerate(self.faults):
            ref = event.instance
            if (isinstance(ref, int) and not 0 <= ref < len(ids)) or (isinstance(ref, str) and ref not in ids):
                problems.append(InitErrorDetails(
                    type=PydanticCustomError("unknown_instance", "unknown instance {ref}; the fleet has {ids}",
                                             {"ref": repr(ref), "ids": ", ".join(ids)}),
                    loc=("faults", i, "instance"), input=ref))
            if event.at_s >= self.duration_s:
                problems.append(InitErrorDetails(
                    type=PydanticCustomError("after_end", "at_s must be before duration_s ({end})",
                                             {"end": self.duration_s}),
                    loc=("faults", i, "at_s"), input=event.at_s))
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self

    def config(self, base_port: int) -> RouteLensConfig:
        """The routelens configuration of the drill (fleet of the built-in mix, gateway knobs)."""
        fleet = self.fleet
        base = builtin_config(fleet.instances, base_port, time_scale=fleet.time_scale, seed=fleet.seed)
        sim = base.sim.model_copy(update={"warm_start": fleet.warm_start})
        gw = self.gateway
        gateway = base.gateway.model_copy(update={"max_attempts": gw.max_attempts,
                                                  "upstream_timeout_s": gw.upstream_timeout_s,
                                                  "connect_timeout_s": gw.connect_timeout_s})
        update: dict[str, object] = {"sim": sim, "gateway": gateway, "scrape": gw.scrape}
        if gw.constraints is not None:
            update["constraints"] = gw.constraints
        return base.model_copy(update=update)

    def scaled(self, speed: float) -> Scenario:
        """The same drill ``speed`` times faster: times divided, the fleet's time scale multiplied."""
        if speed == 1:
            return self
        curve = self.traffic.curve
        curve = curve.model_copy(update={
            "period_s": curve.period_s / speed, "surge_duration_s": curve.surge_duration_s / speed,
            "surge_start_s": None if curve.surge_start_s is None else curve.surge_start_s / speed})
        sc = self.gateway.scrape
        # Every scrape duration shrinks by the same factor (keeping their order), but never below 50 ms a scrape.
        k = min(speed, sc.interval_s / _MIN_SCRAPE_S) if sc.interval_s > _MIN_SCRAPE_S else 1.0
        scrape = type(sc).model_validate({**sc.model_dump(), **{
            name: value / k for name, value in sc.model_dump().items() if name.endswith("_s") and name != "timeout_s"}})
        faults = [f.model_copy(update={
            "at_s": f.at_s / speed, "duration_s": None if f.duration_s is None else f.duration_s / speed,
            "lag_s": None if f.lag_s is None else f.lag_s / speed, "period_s": f.period_s / speed,
            # a leak's rate is per minute of wall time: it must grow as much within the shorter drill
            "rate": (DEFAULT_LEAK_RATE if f.rate is None else f.rate) * speed if f.kind is FaultKind.LEAK else f.rate})
            for f in self.faults]
        return self.model_copy(update={
            "duration_s": self.duration_s / speed,
            "fleet": self.fleet.model_copy(update={"time_scale": self.fleet.time_scale * speed}),
            "gateway": self.gateway.model_copy(update={"scrape": scrape}),
            "traffic": self.traffic.model_copy(update={"curve": curve, "think_s": self.traffic.think_s / speed}),
            "faults": faults})


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file.

    Raises:
        ConfigError: Naming file, line and field of each problem.
        OSError: When the file cannot be read.
    """
    p = Path(path)
    return parse_yaml_model(Scenario, p.read_text(encoding="utf-8"), source=str(p))


async def run_timeline(scenario: Scenario, inject: Callable[[str, FaultSpec], Awaitable[None]],
                       elapsed: Callable[[], float], sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                       instance_of: Callable[[FaultEvent], str] | None = None) -> None:
    """Inject each timeline fault when ``elapsed()`` reaches its ``at_s``.

    Args:
        scenario: The drill; its ``faults`` are run in time order.
        inject: ``inject(instance_id, spec)`` starts one fault.
        elapsed: Seconds since the timeline's origin (traffic start).
        sleep: Waits (injected in tests).
        instance_of: The instance an entry names (default: :meth:`Scenario.instance_of`, the drill
            fleet's; the demo maps an index to its own fleet's instance).
    """
    where = scenario.instance_of if instance_of is None else instance_of
    for event in sorted(scenario.faults, key=lambda f: f.at_s):
        wait = event.at_s - elapsed()
        if wait > 0:
            await sleep(wait)
        await inject(where(event), event.spec())
