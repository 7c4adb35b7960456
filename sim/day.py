"""A drill scenario played day after day against a running gateway: the demo's scripted day.

The day is a drill file (:mod:`sim.scenarios`): its traffic curve and fault timeline are the
drill's, so ``routelens drill run`` plays the same file once on the built-in fleet. Here it is
played in a loop against any configured fleet: a timeline entry that names an instance by index
takes the fleet's instance at that index (:func:`fleet_instance_of`). Each day draws its workload
from the scenario's seed plus the day's number, so two days differ and every run is the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from schemas.config.sim import SimModelProfile
from sim.faults import FaultSpec
from sim.scenarios import FaultEvent, Scenario, run_timeline
from sim.traffic import TrafficResult
from sim.workload import plan_workload, run_workload

__all__ = ["Injected", "fleet_instance_of", "play_days"]


@dataclass(frozen=True, slots=True)
class Injected:
    """One timeline fault as the day played it: the simulator's record, or why it was not started."""

    day: int
    instance: str
    spec: FaultSpec
    record: dict[str, Any] | None
    error: str | None = None


def fleet_instance_of(scenario: Scenario, ids: Sequence[str]) -> Callable[[FaultEvent], str]:
    """Map the scenario's timeline onto a fleet of ``ids``: an index takes the fleet's instance at it.

    Raises:
        ValueError: When an entry names an index the fleet does not have, or an id it lacks.
    """
    for event in scenario.faults:
        ref = event.instance
        if isinstance(ref, int) and not 0 <= ref < len(ids):
            raise ValueError(f"scenario {scenario.name}: instance {ref} at {event.at_s:g} s, "
                             f"but the fleet has {len(ids)} instances")
        if isinstance(ref, str) and ref not in ids:
            raise ValueError(f"scenario {scenario.name}: no instance {ref!r} in the fleet ({', '.join(ids)})")
    return lambda event: ids[event.instance] if isinstance(event.instance, int) else event.instance


async def play_days(scenario: Scenario, gateway: str, instance_urls: Mapping[str, str], *,
                    instance_of: Callable[[FaultEvent], str], profiles: Mapping[str, SimModelProfile],
                    on_result: Callable[[TrafficResult], None] | None = None,
                    on_inject: Callable[[Injected], None] | None = None,
                    on_day: Callable[[int, float], None] | None = None, days: int | None = None) -> None:
    """Play ``scenario`` ``days`` times (None: until cancelled), each day right after the last.

    Args:
        scenario: The day (already scaled, if it is to run faster).
        gateway: Base URL of the gateway the traffic goes through.
        instance_urls: Base URL of each instance by id (faults are posted to its ``/admin/faults``).
        instance_of: Which instance a timeline entry names (:func:`fleet_instance_of`).
        profiles: Models served and their behaviour (the workload's ``expected_model`` for feedback).
        on_result: Called with each request's result as it arrives.
        on_inject: Called with each fault as it is injected (or fails to be).
        on_day: Called with the day's number and its start (``loop.time()``) as each day begins.
        days: How many days; None plays until the task is cancelled.
    """
    loop = asyncio.get_running_loop()
    day = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        while days is None or day < days:
            origin = loop.time()
            if on_day is not None:
                on_day(day, origin)

            async def inject(instance: str, spec: FaultSpec, day: int = day) -> None:
                body = spec.model_dump(mode="json", exclude_none=True)
                record, error = None, None
                try:
                    async with http.post(f"{instance_urls[instance]}/admin/faults", json=body) as resp:
                        if resp.status == 201:
                            record = await resp.json()
                        else:
                            error = f"HTTP {resp.status}: {(await resp.text())[:200]}"
                except (aiohttp.ClientError, TimeoutError) as exc:
                    error = f"{type(exc).__name__}: {exc}"
                if on_inject is not None:
                    on_inject(Injected(day, instance, spec, record, error))

            def elapsed(origin: float = origin) -> float:
                return loop.time() - origin

            plan = plan_workload(scenario.traffic, scenario.duration_s, seed=scenario.fleet.seed + day)
            timeline = asyncio.create_task(run_timeline(scenario, inject, elapsed, instance_of=instance_of))
            try:
                await run_workload(gateway, plan, scenario.traffic, profiles=profiles, on_result=on_result,
                                   origin=origin)
                await timeline
            finally:
                timeline.cancel()
            await asyncio.sleep(max(0.0, origin + scenario.duration_s - loop.time()))
            day += 1
