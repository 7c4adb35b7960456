"""The probe scheduler: every (instance, kind) once per period, spread evenly, each with its own timeout.

The period is cut into one slot per (instance, kind) pair, instance-major so each instance's kinds
sit next to each other and heavy and light probes mix over the whole period (200 instances × 3
kinds never fire at once). Each slot is shifted by up to ±``jitter`` × slot width with the seeded
``rng`` and kept inside its period. A slot dispatches its probe as a task and the loop goes on, so
a hung instance never delays another's slot; at most ``max_concurrent`` probes run (a semaphore),
each raced against ``timeout_s`` on the injected ``sleep``: on expiry the probe is cancelled and
``timed_out(kind, target, elapsed_ms)`` stands in as its (failed) result. A pair whose previous
probe is still running when its next slot comes is skipped and counted, never stacked.

An instance may get fewer kinds (``kinds_of``) or be probed only every n-th period (``every``):
a paid provider's instance, whose every probe costs money. Such an instance's slots are simply
absent from the periods it sits out; the others share the period as before.

At each period's start :class:`probes.capacity.Capacity` works out how many probes that period
needs in flight from each kind's recent probe times; with ``grow_to`` (``probes.max_concurrent:
auto``) the limit rises to match (a big fleet), and a shortfall is logged once per change.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence

from probes.capacity import Capacity
from probes.types import Target
from schemas.common import ProbeKind
from schemas.probe import ProbeResult

__all__ = ["ProbeScheduler", "Slot"]

log = logging.getLogger(__name__)

Slot = tuple[float, Target, ProbeKind]
RunProbe = Callable[[ProbeKind, Target], Awaitable[ProbeResult]]


class ProbeScheduler:
    """Runs ``run(kind, target)`` for every pair once per ``interval_s`` and hands results to ``on_result``.

    Args:
        targets: The instances to probe (replace later with :meth:`set_targets`).
        kinds: The probe kinds to run on each instance.
        run: One probe; the scheduler bounds its time, it need not.
        on_result: Takes every result (timeouts included); its exceptions are logged and contained.
        interval_s: The period.
        jitter: Random shift of each slot as a share of the slot width (0..1).
        timeout_s: How long one probe may take before it counts as failed.
        max_concurrent: Probes in flight at most.
        timed_out: Builds the failed result of a probe that timed out (or raised).
        clock: Monotonic seconds.
        sleep: Awaitable sleep on the same clock.
        rng: Seeded randomness for the jitter.
        on_slip: Called with each probe's start minus its slot time, in seconds.
        on_skip: Called with the kind of each skipped (still running) slot.
        kinds_of: Instance id -> the kinds it gets instead of ``kinds`` (absent: ``kinds``).
        every: Instance id -> probed in one period out of this many, the first included (absent: 1).
        grow_to: Raise ``max_concurrent`` up to this when a period's probes need more in flight
            (None: never; a shortfall is only logged).
        on_capacity: Called with ``(needed, limit)`` at each period's start (the metrics).
    """

    def __init__(
        self,
        targets: Sequence[Target],
        kinds: Sequence[ProbeKind],
        run: RunProbe,
        on_result: Callable[[ProbeResult], None],
        *,
        interval_s: float,
        jitter: float,
        timeout_s: float,
        max_concurrent: int,
        timed_out: Callable[[ProbeKind, Target, float], ProbeResult],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random,
        on_slip: Callable[[float], None] | None = None,
        on_skip: Callable[[ProbeKind], None] | None = None,
        kinds_of: Mapping[str, Sequence[ProbeKind]] | None = None,
        every: Mapping[str, int] | None = None,
        grow_to: int | None = None,
        on_capacity: Callable[[float, int], None] | None = None,
    ) -> None:
        if interval_s <= 0 or timeout_s <= 0 or max_concurrent < 1 or not 0 <= jitter <= 1:
            raise ValueError("interval_s and timeout_s must be > 0, max_concurrent >= 1, jitter in [0, 1]")
        if every and min(every.values()) < 1:
            raise ValueError(f"every must be >= 1 period: {dict(every)}")
        self._targets = list(targets)
        self._members = {t.instance for t in self._targets}
        self._kinds = list(kinds)
        self._kinds_of = {i: list(k) for i, k in (kinds_of or {}).items()}
        self._every = dict(every or {})
        self._run, self._on_result, self._timed_out = run, on_result, timed_out
        self._interval, self._jitter, self._timeout = interval_s, jitter, timeout_s
        self._clock, self._sleep, self._rng = clock, sleep, rng
        self._on_slip, self._on_skip = on_slip, on_skip
        self._sem = asyncio.Semaphore(max_concurrent)
        self._limit = max_concurrent
        self.capacity = Capacity(max_concurrent, interval_s, max(grow_to, max_concurrent) if grow_to else None,
                                 on_capacity)
        self._in_flight: dict[tuple[str, ProbeKind], asyncio.Task[None]] = {}
        self._last_result_at: float | None = None
        self._main: asyncio.Task[None] | None = None
        self._stopping = False
        self.slips: deque[float] = deque(maxlen=10_000)
        self.skipped: Counter[ProbeKind] = Counter()
        self.started = 0

    def set_targets(self, targets: Sequence[Target]) -> None:
        """Replace the fleet: removed instances get no more slots, new ones join at the next period."""
        self._targets = list(targets)
        self._members = {t.instance for t in self._targets}

    def last_result_at(self) -> float | None:
        """Clock reading of the latest result handed on, None before the first (the watchdog's input)."""
        return self._last_result_at

    def in_flight(self) -> int:
        """Probes dispatched and not yet finished."""
        return len(self._in_flight)

    def plan(self, start: float, period: int = 0) -> list[Slot]:
        """The slots of period ``period`` (from 0), beginning at ``start``, in time order (draws from ``rng``)."""
        pairs = [(t, k) for t in self._targets if period % self._every.get(t.instance, 1) == 0
                 for k in self._kinds_of.get(t.instance, self._kinds)]
        if not pairs:
            return []
        width = self._interval / len(pairs)
        end = start + self._interval - 1e-9
        slots: list[Slot] = []
        for i, (target, kind) in enumerate(pairs):
            shift = self._rng.uniform(-self._jitter, self._jitter) * width
            slots.append((min(max(start + (i + 0.5) * width + shift, start), end), target, kind))
        slots.sort(key=lambda s: s[0])
        return slots

    async def run_forever(self) -> None:
        """Probe period after period until :meth:`stop`; a late loop catches up without stacking."""
        self._main = asyncio.current_task()
        start = self._clock()
        period = 0
        try:
            while not self._stopping:
                slots = self.plan(start, period)
                self._hold(self.capacity.check(kind for _, _, kind in slots))
                for due, target, kind in slots:
                    delay = due - self._clock()
                    if delay > 0:
                        await self._sleep(delay)
                    if self._stopping:
                        break
                    if target.instance in self._members:
                        self._dispatch(due, target, kind)
                start += self._interval
                period += 1
                if self._clock() > start + self._interval:
                    start = self._clock()  # a whole period missed (a suspended process): realign, no burst
                elif start > self._clock():
                    await self._sleep(start - self._clock())  # plan at the period's start: fleet changes count
        except asyncio.CancelledError:
            if not self._stopping:
                raise
        finally:
            for task in list(self._in_flight.values()):
                task.cancel()

    def _hold(self, limit: int) -> None:
        """Allow ``limit`` probes in flight (it only grows: each new place is a release of the semaphore)."""
        for _ in range(limit - self._limit):
            self._sem.release()
        self._limit = max(self._limit, limit)

    def stop(self) -> None:
        """End :meth:`run_forever` (probes in flight are cancelled)."""
        self._stopping = True
        if self._main is not None and not self._main.done():
            self._main.cancel()

    def _dispatch(self, due: float, target: Target, kind: ProbeKind) -> None:
        key = (target.instance, kind)
        if key in self._in_flight:
            self.skipped[kind] += 1
            if self._on_skip is not None:
                self._on_skip(kind)
            return
        task = asyncio.create_task(self._probe(due, target, kind))
        self._in_flight[key] = task
        task.add_done_callback(lambda t: self._in_flight.pop(key) if self._in_flight.get(key) is t else None)

    async def _probe(self, due: float, target: Target, kind: ProbeKind) -> None:
        async with self._sem:
            started = self._clock()
            self.started += 1
            self.slips.append(started - due)
            if self._on_slip is not None:
                self._on_slip(started - due)
            result = await self._race(target, kind, started)
            self.capacity.took(kind, self._clock() - started)
        self._last_result_at = self._clock()
        try:
            self._on_result(result)
        except Exception:
            log.exception("on_result failed for %s/%s", target.instance, kind)

    async def _race(self, target: Target, kind: ProbeKind, started: float) -> ProbeResult:
        probe = asyncio.ensure_future(self._run(kind, target))
        timer = asyncio.ensure_future(self._sleep(self._timeout))
        try:
            await asyncio.wait({probe, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not probe.done():
                probe.cancel()
                probe.add_done_callback(_consume)
        elapsed_ms = (self._clock() - started) * 1000.0
        if probe.done() and not probe.cancelled():
            exc = probe.exception()
            if exc is None:
                return probe.result()
            log.error("probe %s/%s raised %r", target.instance, kind, exc)
            failed = self._timed_out(kind, target, elapsed_ms)
            return failed.model_copy(update={"reason": f"probe raised {exc!r}"[:2000], "error_class": "exception"})
        return self._timed_out(kind, target, elapsed_ms)


def _consume(task: asyncio.Future[ProbeResult]) -> None:
    """Retrieve a cancelled probe's outcome so asyncio does not warn about it."""
    if not task.cancelled():
        task.exception()
