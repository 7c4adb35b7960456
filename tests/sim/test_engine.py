"""The engine: KV blocks per request, admission beyond slots and blocks, warm-up and fault speed."""

from __future__ import annotations

import asyncio

import pytest

from schemas.config.sim import SimModelProfile, SimSettings
from sim.clock import VirtualClock
from sim.engine import SimEngine


def _engine(**profile: object) -> tuple[SimEngine, VirtualClock]:
    clock = VirtualClock()
    settings = SimSettings(zero_delay=True, time_scale=2.0)
    return SimEngine(SimModelProfile.model_validate(profile), settings, clock), clock


def test_kv_usage_counts_blocks_of_running_requests_and_long_prompts_take_more():
    engine, _ = _engine(kv_tokens=1600, kv_block_tokens=16, max_concurrency=8)

    async def scenario() -> list[float]:
        seen = []
        async with engine.admit(17):
            seen.append(engine.kv_usage)
            async with engine.admit(800):
                seen.append(engine.kv_usage)
        seen.append(engine.kv_usage)
        return seen

    assert asyncio.run(scenario()) == [0.02, 0.52, 0.0]


def test_requests_queue_in_order_when_blocks_run_out_and_a_lone_one_always_runs():
    engine, _ = _engine(kv_tokens=160, kv_block_tokens=16, max_concurrency=8)
    order: list[str] = []

    async def job(name: str, tokens: int, hold: asyncio.Event) -> None:
        async with engine.admit(tokens):
            order.append(name)
            await hold.wait()

    async def scenario() -> tuple[int, int, int]:
        first, second = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(job("big", 10_000, first))  # more than the cache: runs alone
        await asyncio.sleep(0)
        b = asyncio.create_task(job("small", 16, second))
        await asyncio.sleep(0)
        queued = (engine.waiting, engine.running, engine.blocks_used)
        first.set()
        second.set()
        await asyncio.gather(a, b)
        return queued

    assert asyncio.run(scenario()) == (1, 1, 10)
    assert order == ["big", "small"] and engine.waiting == 0 and engine.running == 0


@pytest.mark.parametrize("release_first", [False, True], ids=["cancel-then-release", "release-then-cancel"])
def test_a_cancelled_waiter_leaves_the_queue_and_unwinds_with_cancelled_error(release_first: bool):
    engine, _ = _engine(max_concurrency=1)

    async def scenario() -> tuple[BaseException | None, int, int]:
        release = asyncio.Event()

        async def hold() -> None:
            async with engine.admit(1):
                await release.wait()

        holder = asyncio.create_task(hold())
        await asyncio.sleep(0)
        waiter = asyncio.create_task(hold())
        await asyncio.sleep(0)
        if release_first:
            # The holder wakes first; the waiter's future is cancelled at once, but its task unwinds
            # only after the holder's release has dropped it from the queue.
            release.set()
            waiter.cancel()
        else:
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
            release.set()
        await holder
        (outcome,) = await asyncio.gather(waiter, return_exceptions=True)
        return outcome, engine.waiting, engine.running

    outcome, waiting, running = asyncio.run(scenario())
    assert isinstance(outcome, asyncio.CancelledError) and (waiting, running) == (0, 0)


def test_cold_start_is_slower_and_warms_up_in_model_time():
    engine, clock = _engine(warmup_s=90, cold_speed=0.25, base_latency_ms=0, prefill_tps=1000, decode_tps=100)
    assert engine.warmup == 0.0
    assert engine.prefill_s(1000) == pytest.approx(4.0) and engine.decode_s(100) == pytest.approx(4.0)
    clock.advance(45)  # time_scale 2: 90 s of model time
    assert engine.warmup == 1.0
    assert engine.prefill_s(1000) == pytest.approx(1.0) and engine.decode_s(100) == pytest.approx(1.0)
    engine.restart()
    assert engine.warmup == 0.0


def test_warm_start_and_fault_speed_factors():
    clock = VirtualClock()
    profile = SimModelProfile(warmup_s=90, base_latency_ms=0, prefill_tps=1000)
    engine = SimEngine(profile, SimSettings(warm_start=True), clock, slow_factor=lambda: 3.0,
                       leak_fraction=lambda: 0.5)
    assert engine.warmup == 1.0
    assert engine.prefill_s(1000) == pytest.approx(3.0)
    assert engine.kv_usage == 0.5 and engine.leaked_blocks == engine.total_blocks // 2

