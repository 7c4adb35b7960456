"""What the shared state in Redis adds to a request, on loopback: the calls a gateway request awaits.

:func:`redis_bench` starts a ``redis-server`` of its own (free loopback port, temp dir, no
persistence), then drives, per request, the same shared-state callers a gateway replica runs with
``shared.backend: redis`` and every shared feature on: the client and shedding buckets
(:class:`ClientThrottle`), a throttled rule's bucket (:class:`Throttles`), the session's binding
(:class:`AffinityBinder`; every 50th request moves its session), and the budget's spend counters
(:class:`BudgetTracker`, whose adds the gateway does not await). Requests arrive at ``rate_rps``
on the gateway's event loop (uvloop), so the background refills and flushes run between them as
they would in the gateway. Each arrival runs the request on both states in turns.

Figures (ms): ``redis_p50_ms``/``redis_p99_ms`` of the time a request spends in those calls with
:class:`RedisShared`; ``memory_*`` the same on :class:`MemoryShared`; ``added_p99_ms`` the
difference of the p99s (goal: at most 1 ms); ``direct_*`` what the design before leases awaited
per request (one bucket take and one counter add, each a round trip), for comparison;
``loop_lag_p99_ms`` how late requests started (the background's cost to the loop, with the
machine's noise and the timer's granularity);
``round_trips_per_request`` the background's Redis round trips over the requests; ``credited``
the tokens admitted on credit and ``refill_waits`` the takes that had to wait for a refill.

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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import uvloop
from redis.asyncio.client import Pipeline

from app.run.procs import free_port
from router_core.resilience.affinity import AffinityBinder
from router_core.resilience.budgets import BudgetTracker
from router_core.resilience.client_throttle import ClientThrottle
from router_core.rules.ir import Origin, Rule, Throttle
from router_core.rules.throttle import Throttles
from router_core.shared.base import MemoryShared, SharedState
from router_core.shared.redis_shared import RedisShared
from schemas.config.economics import AffinitySettings, BudgetBand, BudgetSettings
from schemas.config.shared import ClientThrottle as ClientSettings
from schemas.config.shared import SheddingThrottle, ThrottleSettings

__all__ = ["redis_bench"]

INSTANCES = [f"i{n}" for n in range(8)]
PRIORITIES = ("high", "normal", "low")


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class _Callers:
    """The gateway's shared-state callers, on one :class:`SharedState`."""

    client: ClientThrottle
    rules: Throttles
    rule: Rule
    affinity: AffinityBinder
    budgets: BudgetTracker

    @classmethod
    def on(cls, shared: SharedState) -> _Callers:
        throttles = ThrottleSettings(client=ClientSettings(rate=100, burst=200),
                                     shedding=SheddingThrottle(rate=5000, burst=10000))
        rule = Rule("bench-rule", Origin("bench", 1), throttle=Throttle(5000, 10000, overflow="reject"))
        budgets = BudgetSettings(bands=[BudgetBand(name="all", hours=[(0, 24)], max_spend=1e12, window_s=3600)])
        return cls(ClientThrottle(throttles, shared), Throttles(shared=shared), rule,
                   AffinityBinder(AffinitySettings(header="x-ticket-id"), shared), BudgetTracker(budgets, shared))

    async def request(self, i: int, clients: int, now: datetime) -> None:
        """What one request awaits of the shared state (and the budget add it leaves to the background)."""
        headers = {"Authorization": f"Bearer sk-{i % clients}", "x-priority": PRIORITIES[i % 3]}
        refused = await self.client.admit(headers, "127.0.0.1")
        adm = await self.rules.admit(self.rule)
        session = f"ticket-{i // 10}"
        bound = await self.affinity.bound(session, INSTANCES, {})
        if i % 50 == 49:  # the bound instance was not feasible: the session moves
            await self.affinity.move(session, INSTANCES[(INSTANCES.index(bound or INSTANCES[0]) + 1) % 8])
        self.budgets.record("m", 0.001, now)
        if refused is not None or not adm.admitted:
            raise SystemExit(f"request {i} refused by a bucket sized never to refuse: the figure would be wrong")


async def _time(shared: list[SharedState], requests: int, clients: int, rate_rps: float,
                ) -> tuple[list[list[float]], list[float]]:
    """Per-request seconds in the shared-state calls on each of ``shared``, and how late requests started.

    Each arrival (``rate_rps``) makes the same request on every state, in turns (the first one
    alternates), so the machine's noise falls on all alike.
    """
    callers, now, perf = [_Callers.on(s) for s in shared], datetime.now(UTC), time.perf_counter
    for i in range(200):  # warm: connections open, leases taken
        for c in callers:
            await c.request(i, clients, now)
        await asyncio.sleep(1 / rate_rps)
    out: list[list[float]] = [[] for _ in shared]
    lag = []
    start = perf()
    for i in range(requests):
        due = start + i / rate_rps
        if (ahead := due - perf()) > 0:
            await asyncio.sleep(ahead)
        lag.append(max(0.0, perf() - due))
        for turn in range(len(callers)):
            k = (turn + i) % len(callers)
            t0 = perf()
            await callers[k].request(i, clients, now)
            out[k].append(perf() - t0)
    await asyncio.sleep(0.2)  # the last budget adds
    return out, lag


async def _time_direct(shared: RedisShared, requests: int, clients: int) -> list[float]:
    """Per-request seconds of the design before leases: one bucket take and one counter add, each awaited."""
    store, out, perf = shared.store, [], time.perf_counter

    def add(pipe: Pipeline) -> None:
        store.add(pipe, "direct:budget", 0.001, 60_000)

    for i in range(requests + 200):
        def take(pipe: Pipeline, bucket: str = f"direct:{i % clients}") -> None:
            store.grant(pipe, bucket, 1e6, 1e6, 0.0, 0, 1)

        t0 = perf()
        await store.run(take)
        await store.run(add)
        if i >= 200:
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


def _ms(values: list[float], q: float, digits: int = 3) -> float:
    return round(_quantile(values, q) * 1e3, digits)


def redis_bench(requests: int = 5000, clients: int = 50, rate_rps: float = 1000.0) -> dict[str, Any]:
    """``{"redis_p99_ms", "redis_p50_ms", "memory_p99_ms", "added_p99_ms", ...}``: see the module docstring."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="routelens-redis-bench-") as workdir:
        proc = _start_redis(port, workdir)
        try:
            async def run() -> dict[str, Any]:
                shared = RedisShared(f"redis://127.0.0.1:{port}/0", key_prefix="bench:", timeout_s=0.05)
                await shared.start()
                try:
                    (redis_s, memory_s), lag = await _time([shared, MemoryShared()], requests, clients, rate_rps)
                    stats = shared.stats()
                    healthy = shared.healthy and shared.fallbacks == 0
                    direct_s = await _time_direct(shared, requests, clients)
                    healthy = healthy and shared.healthy
                finally:
                    await shared.close()
                return {"redis": redis_s, "memory": memory_s, "lag": lag, "direct": direct_s, "stats": stats,
                        "healthy": healthy}

            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                got = runner.run(run())
        finally:
            proc.kill()
            proc.wait(5)
    if not got["healthy"]:
        raise SystemExit("Redis calls fell back to local state during the bench: the figure would be wrong")
    redis_s, memory_s, stats = got["redis"], got["memory"], got["stats"]
    return {"redis_p99_ms": _ms(redis_s, 0.99), "redis_p50_ms": _ms(redis_s, 0.50),
            "redis_p999_ms": _ms(redis_s, 0.999), "memory_p999_ms": _ms(memory_s, 0.999),
            "memory_p99_ms": _ms(memory_s, 0.99, 4), "memory_p50_ms": _ms(memory_s, 0.50, 4),
            "added_p99_ms": round((_quantile(redis_s, 0.99) - _quantile(memory_s, 0.99)) * 1e3, 3),
            "direct_p99_ms": _ms(got["direct"], 0.99), "direct_p50_ms": _ms(got["direct"], 0.50),
            "loop_lag_p99_ms": _ms(got["lag"], 0.99),
            "round_trips_per_request": round(stats["rounds"] / (requests + 200), 3),
            "credited": stats["credited"], "refill_waits": stats["waits"], "requests": requests, "rate_rps": rate_rps}


if __name__ == "__main__":
    print(json.dumps(redis_bench()))
