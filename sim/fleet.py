"""Serve every instance of the fleet configuration from one process and one event loop.

``python -m sim.fleet --config routelens.yaml`` runs the fleet until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from schemas.config import RouteLensConfig, SimModelProfile
from schemas.errors import ConfigError
from schemas.yamlconf import parse_yaml_model
from sim.server import build_instance_app

__all__ = ["FleetHandle", "main", "run_fleet", "start_fleet"]

_SHUTDOWN_TIMEOUT_S = 1.0  # in-flight simulated requests are not worth waiting for at shutdown


@dataclass
class FleetHandle:
    """A running fleet: the bound base URL and application of every instance, by instance id."""

    urls: dict[str, str] = field(default_factory=dict)
    apps: dict[str, web.Application] = field(default_factory=dict)
    _runners: list[web.AppRunner] = field(default_factory=list)

    async def close(self) -> None:
        """Stop every instance; safe to call twice."""
        runners, self._runners = self._runners, []
        for runner in reversed(runners):
            await runner.cleanup()


async def start_fleet(config: RouteLensConfig, *, clock: Callable[[], float] = time.monotonic) -> FleetHandle:
    """Start one aiohttp site per ``config.fleet.instances`` entry on the host and port of its URL.

    A URL with port 0 binds a free port; :attr:`FleetHandle.urls` holds the address actually bound.

    Args:
        config: The configuration; ``config.sim`` supplies the knobs and per-model profiles.
        clock: Monotonic seconds for the instances' latency observations.

    Returns:
        The running fleet. Close it with :meth:`FleetHandle.close`.
    """
    handle = FleetHandle()
    try:
        for spec in config.fleet.instances:
            parts = urlsplit(spec.url)
            host = parts.hostname or "127.0.0.1"
            port = parts.port if parts.port is not None else (443 if parts.scheme == "https" else 80)
            profile = config.sim.models.get(spec.model, SimModelProfile())
            app = build_instance_app(spec, profile, config.sim, clock=clock)
            runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
            await runner.setup()
            handle._runners.append(runner)
            await web.TCPSite(runner, host, port).start()
            bound_port = runner.addresses[0][1]
            handle.urls[spec.id] = f"http://{host}:{bound_port}"
            handle.apps[spec.id] = app
    except BaseException:
        await handle.close()
        raise
    return handle


async def _serve(config: RouteLensConfig) -> None:
    handle = await start_fleet(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    try:
        for spec in config.fleet.instances:
            print(f"sim instance {spec.id} {spec.model} {handle.urls[spec.id]}")
        print("fleet ready", flush=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await handle.close()


def run_fleet(config: RouteLensConfig) -> None:
    """Serve the fleet on a uvloop event loop until SIGINT or SIGTERM, then shut down cleanly.

    Prints ``sim instance <id> <model> <url>`` per instance, then ``fleet ready``.

    Args:
        config: The configuration whose ``fleet`` and ``sim`` sections are served.
    """
    try:
        import uvloop
    except ImportError:  # uvloop is not built for Windows; the default loop works, only slower
        loop_factory = None
    else:
        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_serve(config))


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m sim.fleet [--config routelens.yaml]``.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        The exit status: 0 after a clean shutdown, 2 for a bad configuration.
    """
    parser = argparse.ArgumentParser(prog="python -m sim.fleet", description="Serve the simulated fleet.")
    parser.add_argument("--config", default="routelens.yaml", help="path to routelens.yaml")
    args = parser.parse_args(argv)
    path = Path(args.config)
    try:
        config = parse_yaml_model(RouteLensConfig, path.read_text(encoding="utf-8"), source=str(path))
    except (OSError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run_fleet(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
