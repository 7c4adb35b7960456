"""The prober over a big fleet: 200 instances × 3 kinds every 30 s must still be probed every period.

The audit ran the prober over 200 simulated instances with the former fixed
``max_concurrent: 16``: a period needs about 2.8 s of probes per instance (syntax 0.43 s,
latency 0.59 s, semantic 1.74 s), 18.4 in flight on average, so the slots queued: within minutes
three quarters of the probes started more than 10 s late and 1,190 slots were skipped, and
nothing said why.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from app.run.prober import Prober
from probes.http import call_chat
from probes.scheduler import ProbeScheduler
from probes.types import Target
from schemas.common import ProbeKind
from schemas.config import RouteLensConfig
from schemas.probe import ProbeResult
from tests.probes.test_scheduler import KINDS, VirtualTime, make_result, targets, timed_out

TOOK = {ProbeKind.SYNTAX: 0.43, ProbeKind.LATENCY: 0.59, ProbeKind.SEMANTIC: 1.74}  # the audit's means
NEEDED = 200 * sum(TOOK.values()) / 30.0  # 18.4 probes in flight on average


def big_fleet(vt: VirtualTime, slips: list[tuple[float, float]], **kw: int | None) -> tuple[ProbeScheduler, list[int]]:
    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        await vt.sleep(TOOK[kind])
        return make_result(kind, t)

    limits: list[int] = []
    sched = ProbeScheduler(targets(200), KINDS, run, lambda _: None, interval_s=30.0, jitter=0.1, timeout_s=10.0,
                           timed_out=timed_out, clock=vt.clock, sleep=vt.sleep, rng=random.Random(7),
                           on_slip=lambda s: slips.append((vt.now, s)),
                           on_capacity=lambda needed, limit: limits.append(limit), **kw)  # type: ignore[arg-type]
    return sched, limits


def worst_slip(slips: list[tuple[float, float]], period: int) -> float:
    """The latest start against its slot among the probes started in ``period`` (30 s each)."""
    return max(s for t, s in slips if period * 30 <= t < (period + 1) * 30)


async def drive(vt: VirtualTime, sched: ProbeScheduler, until: float) -> None:
    task = asyncio.create_task(sched.run_forever())
    await vt.run_until(until)
    sched.stop()
    await task


def test_auto_raises_the_limit_and_every_pair_is_probed_each_period_on_time() -> None:
    vt = VirtualTime()
    slips: list[tuple[float, float]] = []
    sched, limits = big_fleet(vt, slips, max_concurrent=16, grow_to=256)
    asyncio.run(drive(vt, sched, 120.0))
    # The first period, before any probe time is known, runs at 16 and falls behind; the second
    # (at 28) catches up; from the third on every probe starts in its slot.
    assert limits[:4] == [16, 28, 28, 28] and math.ceil(NEEDED * 1.5) == 28
    assert sum(sched.skipped.values()) == 0
    assert worst_slip(slips, 0) > 1.0 and worst_slip(slips, 2) == worst_slip(slips, 3) == 0.0


def test_a_fixed_limit_that_cannot_keep_up_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    vt = VirtualTime()
    slips: list[tuple[float, float]] = []
    sched, limits = big_fleet(vt, slips, max_concurrent=16)
    with caplog.at_level(logging.WARNING, logger="probes.scheduler"):
        asyncio.run(drive(vt, sched, 120.0))
    assert set(limits) == {16}
    assert worst_slip(slips, 3) > 10.0  # it falls further behind each period: what the warning is about
    said = [r.getMessage() for r in caplog.records if "keep up" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(f"probes cannot keep up: a period of 600 probes needs about {NEEDED:.1f} in flight")
    assert f"raise probes.max_concurrent to {math.ceil(NEEDED * 1.5)} or set it to auto" in said[0]
    assert sched.capacity.needed == pytest.approx(NEEDED, rel=0.01)


def test_auto_is_the_default_and_a_number_still_holds() -> None:
    fleet = {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]}
    assert RouteLensConfig.model_validate({"fleet": fleet}).probes.max_concurrent == "auto"
    given = RouteLensConfig.model_validate({"fleet": fleet, "probes": {"max_concurrent": 32}})
    assert given.probes.max_concurrent == 32


def test_a_semantic_rounds_requests_never_wait_for_a_pooled_connection(tmp_path: Path) -> None:
    """A probe's time is the instance's: with the pool capped at max_concurrent, six requests of one round
    went two at a time and the last measured three answers' time (a latency probe behind them, its wait)."""

    async def run() -> list[float]:
        async def chat(_: web.Request) -> web.Response:
            await asyncio.sleep(0.25)
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        server = TestServer(app)
        await server.start_server()
        url = str(server.make_url("")).rstrip("/")
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": "a", "model": "m", "url": url}]},
            "probes": {"enabled": True, "kinds": ["syntax"], "max_concurrent": 2, "interval_s": 600}})
        prober = Prober(config, db_path=str(tmp_path / "t.duckdb"), emit=lambda _: None, apply=None,
                        registry=CollectorRegistry(), embedder=object())  # type: ignore[arg-type]
        await prober.start()  # the first slot is minutes away: nothing else is sent meanwhile
        try:
            assert prober._session is not None
            target = prober.targets[0]
            calls = await asyncio.gather(*(call_chat(prober._session, target, {"messages": []}, timeout_s=5,
                                                     max_bytes=4096, marker_header="x-probe") for _ in range(6)))
            return [c.elapsed_ms for c in calls]
        finally:
            await prober.stop()
            await server.close()

    started = time.perf_counter()
    elapsed = asyncio.run(run())
    assert time.perf_counter() - started < 5
    assert max(elapsed) < 450, elapsed  # one answer's time (250 ms) and the loop's; never 500-750 ms of queueing
