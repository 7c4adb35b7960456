"""Admission, KV blocks, warm-up and service time of one instance: the parts a scheduler sees.

Requests are admitted in arrival order while a sequence slot is free and their KV blocks fit;
the rest wait (``vllm:num_requests_waiting``). Service times are *model* seconds: prefill and
decode at the profile's token rates, slowed while cold, under faults and when many sequences
share the batch; they are slept divided by ``time_scale``, or not at all in zero-delay mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from schemas.config.sim import SimModelProfile, SimSettings
from sim.behaviour import warmup_progress
from sim.clock import Clock

__all__ = ["SimEngine"]

_BATCH_SLOWDOWN = 0.5  # a full batch decodes each sequence this much slower than a lone one


class SimEngine:
    """Occupancy and timing of one instance.

    Args:
        profile: Model behaviour: token rates, slots, KV capacity, warm-up.
        settings: Simulator knobs: ``time_scale`` and ``zero_delay``.
        clock: Wall clock; model time is wall time times ``time_scale``.
        slow_factor: Current latency multiplier from faults (1 when healthy).
        leak_fraction: Current share of the KV cache held outside routed requests (leak, kv-pressure).
    """

    def __init__(self, profile: SimModelProfile, settings: SimSettings, clock: Clock,
                 slow_factor: Callable[[], float] = lambda: 1.0,
                 leak_fraction: Callable[[], float] = lambda: 0.0) -> None:
        self.profile = profile
        self.settings = settings
        self.clock = clock
        self.total_blocks = max(1, profile.kv_tokens // profile.kv_block_tokens)
        self.blocks_used = 0
        self.running = 0
        self.started_at = clock.now()
        if settings.warm_start:
            self.started_at -= profile.warmup_s / settings.time_scale
        self._slow_factor = slow_factor
        self._leak_fraction = leak_fraction
        self._queue: deque[tuple[int, asyncio.Future[None]]] = deque()

    def restart(self) -> None:
        """Start cold again: warm-up begins anew."""
        self.started_at = self.clock.now()

    @property
    def warmup(self) -> float:
        """Warm-up progress 0-1 (``routelens_sim_warmup_progress``)."""
        age = (self.clock.now() - self.started_at) * self.settings.time_scale
        return warmup_progress(self.profile, age)

    @property
    def waiting(self) -> int:
        """Requests queued for a slot (cancelled ones leave the queue as they unwind)."""
        return len(self._queue)

    @property
    def leaked_blocks(self) -> int:
        """KV blocks held by a leak or kv-pressure."""
        return int(self._leak_fraction() * self.total_blocks)

    @property
    def kv_usage(self) -> float:
        """Share of KV blocks in use (running sequences plus leak), 0-1."""
        return min(1.0, (self.blocks_used + self.leaked_blocks) / self.total_blocks)

    def blocks_for(self, tokens: int) -> int:
        """KV blocks that ``tokens`` tokens occupy (never more than the whole cache)."""
        return min(self.total_blocks, max(1, math.ceil(tokens / self.profile.kv_block_tokens)))

    def _fits(self, blocks: int) -> bool:
        if self.running >= self.profile.max_concurrency:
            return False
        # A lone request always runs, even when a leak left too little room for it.
        return self.running == 0 or self.blocks_used + self.leaked_blocks + blocks <= self.total_blocks

    def _grant(self, blocks: int) -> None:
        self.running += 1
        self.blocks_used += blocks

    def _release(self, blocks: int) -> None:
        self.running -= 1
        self.blocks_used -= blocks
        while self._queue and self._fits(self._queue[0][0]):
            need, waiter = self._queue.popleft()
            if not waiter.done():
                self._grant(need)
                waiter.set_result(None)

    @asynccontextmanager
    async def admit(self, tokens: int) -> AsyncIterator[None]:
        """Wait for a slot and the KV blocks of ``tokens``, hold them until the block exits."""
        blocks = self.blocks_for(tokens)
        if not self._queue and self._fits(blocks):
            self._grant(blocks)
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.append((blocks, waiter))
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._release(blocks)  # granted just as we were cancelled: give it back
                else:
                    with contextlib.suppress(ValueError):  # _release may have dropped it already
                        self._queue.remove((blocks, waiter))
                raise
        try:
            yield
        finally:
            self._release(blocks)

    def _speed(self) -> float:
        cold = self.profile.cold_speed
        batch = 1.0 + _BATCH_SLOWDOWN * max(self.running - 1, 0) / self.profile.max_concurrency
        return (cold + (1.0 - cold) * self.warmup) / (self._slow_factor() * batch)

    def prefill_s(self, prompt_tokens: int) -> float:
        """Model seconds until the first token: base latency plus prefill."""
        p = self.profile
        return (p.base_latency_ms / 1000 + prompt_tokens / p.prefill_tps) / self._speed()

    def decode_s(self, completion_tokens: int) -> float:
        """Model seconds to generate ``completion_tokens``."""
        return completion_tokens / self.profile.decode_tps / self._speed()

    async def pause(self, model_seconds: float) -> None:
        """Sleep ``model_seconds`` of model time, unless the simulator runs with ``zero_delay``."""
        if not self.settings.zero_delay and model_seconds > 0:
            await asyncio.sleep(model_seconds / self.settings.time_scale)
