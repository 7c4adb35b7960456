"""Serve every instance of a fleet from one process and one event loop, and log its faults.

``routelens sim fleet --config routelens.yaml`` (or ``--instances N --base-port P`` for the
built-in mix) runs the fleet until SIGINT or SIGTERM (:func:`run_fleet`). Each instance listens on its own port; a
crash closes that port and a recovery reopens it, the instance's state surviving in between.
An ``engine: external`` instance (a hosted provider, a real server) is not simulated: it is left
out and named as such in the output.
"""

from __future__ import annotations

import asyncio
import errno
import json
import signal
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import urlsplit

from aiohttp import web

from schemas.config import RouteLensConfig
from schemas.fleet import EXTERNAL, InstanceSpec
from sim.behaviour import configured_profile
from sim.clock import Clock, RealClock
from sim.faults import FaultRecord, FaultSpec
from sim.scenarios import Scenario, run_timeline
from sim.server import SimInstance, build_instance_app

__all__ = ["FaultLog", "FleetHandle", "FleetInstance", "InstancePortError", "fleet_timeline", "run_fleet",
           "simulated", "start_fleet"]

_TICK_S = 0.05
_WHY = {errno.EADDRINUSE: "is in use", errno.EACCES: "needs privileges this process lacks",
        errno.EADDRNOTAVAIL: "cannot be bound: the host is not an address of this machine"}


class InstancePortError(OSError):
    """An instance's port cannot be bound at start-up: in use (the fleet already runs?), privileged, or foreign.

    ``strerror`` is one line naming the instance, the port and the host.
    """

    def __init__(self, instance: str, host: str, port: int, cause: OSError) -> None:
        why = _WHY.get(cause.errno or 0, f"cannot be bound: {cause.strerror or cause}")
        super().__init__(cause.errno, f"port {port} on {host} {why} (instance {instance})")
        self.instance, self.host, self.port = instance, host, port


class FleetInstance:
    """One instance of the fleet and its listening port (the :class:`sim.lifecycle.Lifecycle`)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.instance: SimInstance | None = None
        self.app: web.Application | None = None
        self._runner: web.AppRunner | None = None
        self._lock = asyncio.Lock()

    @property
    def url(self) -> str:
        """Base URL of the bound port."""
        return f"http://{self.host}:{self.port}"

    async def up(self) -> None:
        """Listen (again); the first call binds a free port when the configured one is 0."""
        async with self._lock:
            if self._runner is not None:
                return
            assert self.instance is not None
            inst = self.instance
            self.app = build_instance_app(inst.spec, inst.engine.profile, inst.settings, instance=inst)
            runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=0.0)
            await runner.setup()
            try:
                await web.TCPSite(runner, self.host, self.port, reuse_address=True).start()
            except BaseException:
                await runner.cleanup()
                raise
            self.port = runner.addresses[0][1]
            self._runner = runner

    async def down(self) -> None:
        """Close the port and every connection to it."""
        async with self._lock:
            runner, self._runner = self._runner, None
            if runner is not None:
                await runner.cleanup()


class FaultLog:
    """Writes each fault start and end as one JSON line (and a short line on stdout)."""

    def __init__(self, path: str | Path | None, echo: TextIO | None = None) -> None:
        self._file = open(path, "a", encoding="utf-8") if path is not None else None
        self._echo = echo

    def __call__(self, event: Literal["start", "end"], record: FaultRecord) -> None:
        """Record one event."""
        if self._file is not None:
            self._file.write(json.dumps({"event": event, **record.to_json()}) + "\n")
            self._file.flush()
        if self._echo is not None:
            print(f"fault {event} {record.instance} {record.kind.value} {record.id}", file=self._echo, flush=True)

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()


@dataclass
class FleetHandle:
    """A running fleet: every instance by id, with its bound URL."""

    members: dict[str, FleetInstance] = field(default_factory=dict)
    _ticker: asyncio.Task[None] | None = None

    @property
    def urls(self) -> dict[str, str]:
        """Base URL per instance id."""
        return {iid: m.url for iid, m in self.members.items()}

    @property
    def instances(self) -> dict[str, SimInstance]:
        """The simulated instances by id."""
        return {iid: m.instance for iid, m in self.members.items() if m.instance is not None}

    @property
    def apps(self) -> dict[str, web.Application]:
        """The current application of each instance that is up."""
        return {iid: m.app for iid, m in self.members.items() if m.app is not None}

    async def close(self) -> None:
        """Stop every instance; safe to call twice."""
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
            self._ticker = None
        for member in reversed(list(self.members.values())):
            if member.instance is not None:
                await member.instance.close()
            await member.down()


async def _tick(instances: list[SimInstance]) -> None:
    while True:
        for instance in instances:
            await instance.tick()
        await asyncio.sleep(_TICK_S)


def simulated(instances: list[InstanceSpec]) -> list[InstanceSpec]:
    """The instances a simulated fleet serves: all but ``engine: external`` ones (real servers elsewhere)."""
    return [spec for spec in instances if spec.engine != EXTERNAL]


async def start_fleet(config: RouteLensConfig, *, clock: Clock | None = None,
                      on_fault: Callable[[Literal["start", "end"], FaultRecord], None] | None = None) -> FleetHandle:
    """Start one aiohttp site per ``config.fleet.instances`` entry on the host and port of its URL.

    ``engine: external`` instances are not simulated (:func:`simulated`): none is started for them.

    A URL with port 0 binds a free port; :attr:`FleetHandle.urls` holds the address actually bound.

    Args:
        config: The configuration; ``config.sim`` supplies the knobs and per-model profiles.
        clock: Wall clock for the instances (the machine's by default).
        on_fault: Listener for every fault start and end.

    Returns:
        The running fleet. Close it with :meth:`FleetHandle.close`.

    Raises:
        InstancePortError: An instance's port cannot be bound (the ones started are stopped).
    """
    handle = FleetHandle()
    clock = clock or RealClock()
    try:
        for spec in simulated(config.fleet.instances):
            parts = urlsplit(spec.url)
            port = parts.port if parts.port is not None else (443 if parts.scheme == "https" else 80)
            member = FleetInstance(parts.hostname or "127.0.0.1", port)
            profile = configured_profile(spec.model, config.sim.models.get(spec.model))
            member.instance = SimInstance(spec, profile, config.sim, clock, lifecycle=member, on_fault=on_fault)
            handle.members[spec.id] = member
            try:
                await member.up()
            except OSError as exc:
                raise InstancePortError(spec.id, member.host, port, exc) from exc
    except BaseException:
        await handle.close()
        raise
    handle._ticker = asyncio.create_task(_tick(list(handle.instances.values())))
    return handle


def fleet_timeline(scenario: Scenario,
                   config: RouteLensConfig) -> Callable[[FleetHandle], Coroutine[Any, Any, None]]:
    """Run ``scenario``'s fault timeline against a fleet from the moment it is ready.

    Raises:
        ValueError: When the timeline names an instance the fleet does not have.
    """
    ids = {spec.id for spec in simulated(config.fleet.instances)}
    missing = sorted({scenario.instance_of(f) for f in scenario.faults} - ids)
    if missing:
        raise ValueError(f"scenario {scenario.name} names instances this fleet lacks: {', '.join(missing)}")

    async def run(handle: FleetHandle) -> None:
        loop = asyncio.get_running_loop()
        origin = loop.time()

        async def inject(instance: str, spec: FaultSpec) -> None:
            handle.instances[instance].inject(spec)

        await run_timeline(scenario, inject, lambda: loop.time() - origin)

    return run


async def _serve(config: RouteLensConfig, fault_log: str | None,
                 timeline: Callable[[FleetHandle], Coroutine[Any, Any, None]] | None) -> None:
    log = FaultLog(fault_log, echo=sys.stdout)
    try:
        handle = await start_fleet(config, on_fault=log)
    except BaseException:
        log.close()
        raise
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    try:
        for spec in config.fleet.instances:
            if spec.engine == EXTERNAL:
                print(f"not simulated {spec.id} {spec.model} {spec.url}: engine external (a real server)")
            else:
                print(f"sim instance {spec.id} {spec.model} {handle.urls[spec.id]}")
        print("fleet ready", flush=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if timeline is not None:
            task = asyncio.create_task(timeline(handle))
        await stop.wait()
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await handle.close()
        log.close()


def run_fleet(config: RouteLensConfig, *, fault_log: str | None = None,
              timeline: Callable[[FleetHandle], Coroutine[Any, Any, None]] | None = None) -> None:
    """Serve the fleet on a uvloop event loop until SIGINT or SIGTERM, then shut down cleanly.

    Prints ``sim instance <id> <model> <url>`` per simulated instance (``not simulated <id> <model>
    <url>: engine external ...`` for an external one), then ``fleet ready``, then one
    ``fault start|end <instance> <kind> <id>`` line per fault event.

    Args:
        config: The configuration whose ``fleet`` and ``sim`` sections are served.
        fault_log: Append fault starts and ends to this JSON-lines file.
        timeline: Run this against the fleet once it is ready (a scenario's fault timeline).

    Raises:
        InstancePortError: An instance's port cannot be bound (every instance started is stopped).
        OSError: The fault log cannot be opened.
    """
    try:
        import uvloop
    except ImportError:  # uvloop is not built for Windows; the default loop works, only slower
        loop_factory = None
    else:
        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_serve(config, fault_log, timeline))
