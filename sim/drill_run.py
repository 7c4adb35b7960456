"""Running a drill against a live fleet and gateway: traffic and fault timeline, then the traces.

Process wiring (starting the fleet and the gateway) belongs to the command line
(``app/cli/drill.py``); this module only talks HTTP to what is already running.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from sim.behaviour import BUILTIN_MODELS
from sim.faults import FaultSpec
from sim.scenarios import Scenario, run_timeline
from sim.traffic import TrafficResult
from sim.workload import plan_workload, run_workload

__all__ = ["DrillRun", "execute_drill", "fetch_attempts"]


@dataclass
class DrillRun:
    """What a drill observed: the traffic's results, each request's attempts, the faults injected."""

    scenario: Scenario
    started_epoch: float
    results: list[TrafficResult]
    attempts: dict[str, list[str]] = field(default_factory=dict)  # request id -> instances tried, in order
    injected: list[dict[str, Any]] = field(default_factory=list)
    inject_errors: list[str] = field(default_factory=list)


async def fetch_attempts(http: aiohttp.ClientSession, gateway: str, request_ids: list[str],
                         concurrency: int = 16) -> dict[str, list[str]]:
    """Read the instances each request was tried on from the gateway's traces (missing ones skipped)."""
    slots = asyncio.Semaphore(concurrency)
    out: dict[str, list[str]] = {}

    async def one(request_id: str) -> None:
        async with slots:
            try:
                async with http.get(f"{gateway}/v1/traces/{request_id}") as resp:
                    if resp.status != 200:
                        return
                    trace = await resp.json()
            except (aiohttp.ClientError, TimeoutError):
                return
        out[request_id] = [str(a["instance"]) for a in trace.get("attempts", [])]

    await asyncio.gather(*(one(rid) for rid in request_ids))
    return out


async def execute_drill(scenario: Scenario, gateway: str, instance_urls: dict[str, str]) -> DrillRun:
    """Send the scenario's traffic through ``gateway`` while injecting its faults on time.

    Args:
        scenario: The drill (already scaled, if it is to run faster).
        gateway: Base URL of the gateway.
        instance_urls: Base URL of each instance, by id (faults are posted to ``/admin/faults``).

    Returns:
        The observations; feed them to :func:`sim.drill.build_report`.
    """
    plan = plan_workload(scenario.traffic, scenario.duration_s, seed=scenario.fleet.seed)
    profiles = {m.name: m.profile for m in BUILTIN_MODELS}
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        origin, epoch0 = loop.time(), time.time()
        run = DrillRun(scenario, epoch0, [])

        async def inject(instance: str, spec: FaultSpec) -> None:
            body = spec.model_dump(mode="json", exclude_none=True)
            try:
                async with http.post(f"{instance_urls[instance]}/admin/faults", json=body) as resp:
                    if resp.status == 201:
                        run.injected.append(await resp.json())
                    else:
                        run.inject_errors.append(f"{instance}: HTTP {resp.status}: {await resp.text()}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                run.inject_errors.append(f"{instance}: {type(exc).__name__}: {exc}")

        timeline = asyncio.create_task(run_timeline(scenario, inject, lambda: loop.time() - origin))
        try:
            run.results = await run_workload(gateway, plan, scenario.traffic, profiles=profiles, origin=origin)
            await timeline
        finally:
            timeline.cancel()
        ids = [r.request_id for r in run.results if r.request_id]
        run.attempts = await fetch_attempts(http, gateway, ids)
    return run
