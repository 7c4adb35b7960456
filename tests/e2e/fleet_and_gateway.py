"""A simulated fleet and one gateway as real processes, from one configuration (shared by e2e tests)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from app.run.procs import Child, wait_http

__all__ = ["fleet_and_gateway"]


@contextmanager
def fleet_and_gateway(cfg: dict[str, Any], folder: Path) -> Iterator[str]:
    """Write ``cfg`` in ``folder``, start ``sim fleet`` and ``serve --workers 1`` on it; yield the gateway URL."""
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    py = [sys.executable, "-m", "app", "--config", str(path)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    children: list[Child] = []
    try:
        fleet = Child("sim", [*py, "sim", "fleet"], env, "fleet ready")
        children.append(fleet)
        assert fleet.wait_ready(60), fleet.tail()
        serve = Child("gateway", [*py, "serve", "--workers", "1"], env, "gateway ready")
        children.append(serve)
        gateway = f"http://{cfg['gateway']['host']}:{cfg['gateway']['port']}"
        assert serve.wait_ready(60) and wait_http(f"{gateway}/health", 10, serve.alive), serve.tail()
        yield gateway
    finally:
        for child in reversed(children):
            child.stop()
