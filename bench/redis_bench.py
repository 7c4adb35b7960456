"""What the shared state in Redis adds to a request: a bucket take and a counter add, on loopback.

:func:`redis_bench` starts a ``redis-server`` of its own (free loopback port, temp dir, no
persistence), then times, per request, what a gateway replica does with ``shared.backend: redis``
on the request path: one token take (the Lua script) and one counter add (INCRBYFLOAT + PEXPIRE
NX), sequentially on the gateway's event loop (uvloop). ``redis_p99_ms`` is the p99 of that time
(goal: at most 1 ms); ``memory_p99_ms`` is the same on :class:`MemoryShared` for comparison.

``python -m bench.redis_bench`` prints the figures as JSON.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

import uvloop

from app.run.procs import free_port
from router_core.resilience.redis_shared import RedisShared
from router_core.resilience.shared import MemoryShared, SharedState

__all__ = ["redis_bench"]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _time(shared: SharedState, requests: int, clients: int) -> list[float]:
    """Per-request seconds of one take and one add (``clients`` keys, round robin)."""
    for i in range(200):  # warm: connections open, script loaded
        await shared.take(f"warm:{i % clients}", 1e6, 1e6)
    out: list[float] = []
    perf = time.perf_counter
    for i in range(requests):
        t0 = perf()
        await shared.take(f"client:{i % clients}", 1e6, 1e6)
        await shared.add("budget:m", 0.001, 60.0)
        out.append(perf() - t0)
    return out


def _start_redis(port: int, workdir: str) -> subprocess.Popen[bytes]:
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise SystemExit(f"redis-server did not start on port {port}")


def redis_bench(requests: int = 5000, clients: int = 50) -> dict[str, Any]:
    """``{"redis_p99_ms", "redis_p50_ms", "memory_p99_ms", "requests"}``: the Redis calls' time per request."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="routelens-redis-bench-") as workdir:
        proc = _start_redis(port, workdir)
        try:
            async def run() -> tuple[list[float], list[float], bool]:
                shared = RedisShared(f"redis://127.0.0.1:{port}/0", key_prefix="bench:", timeout_s=0.05)
                await shared.start()
                try:
                    times = await _time(shared, requests, clients)
                    healthy = shared.healthy and shared.fallbacks == 0
                finally:
                    await shared.close()
                return times, await _time(MemoryShared(), requests, clients), healthy

            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                redis_s, memory_s, healthy = runner.run(run())
        finally:
            proc.kill()
            proc.wait(5)
    if not healthy:
        raise SystemExit("Redis calls fell back to local state during the bench: the figure would be wrong")
    return {"redis_p99_ms": round(_quantile(redis_s, 0.99) * 1e3, 3),
            "redis_p50_ms": round(_quantile(redis_s, 0.50) * 1e3, 3),
            "memory_p99_ms": round(_quantile(memory_s, 0.99) * 1e3, 4), "requests": requests}


if __name__ == "__main__":
    print(json.dumps(redis_bench()))
