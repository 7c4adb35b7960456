import asyncio
import heapq
import itertools
import random
from collections import Counter
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from probes.scheduler import ProbeScheduler
from probes.types import Target
from schemas.common import ProbeKind, ProbeVerdict
from schemas.probe import ProbeResult

KINDS = list(ProbeKind)
T0 = datetime(2026, 12, 1, tzinfo=UTC)


class VirtualTime:
    """Virtual monotonic time: ``sleep`` parks until ``run_until`` moves the clock past its wake-up."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, dt: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (self.now + max(dt, 0.0), next(self._seq), fut))
        await fut

    async def run_until(self, t: float) -> None:
        while True:
            await settle()
            while self._heap and self._heap[0][2].done():
                heapq.heappop(self._heap)
            if not self._heap or self._heap[0][0] > t:
                break
            when, _, fut = heapq.heappop(self._heap)
            self.now = max(self.now, when)
            fut.set_result(None)
        self.now = t
        await settle()


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


def targets(n: int) -> list[Target]:
    return [Target(instance=f"i{j:03d}", model="m", url=f"http://i{j}") for j in range(n)]


def make_result(kind: ProbeKind, t: Target, verdict: ProbeVerdict = ProbeVerdict.OK, reason: str = "") -> ProbeResult:
    return ProbeResult(probe_id="p", ts=T0, instance=t.instance, model=t.model, kind=kind, verdict=verdict,
                       reason=reason, error_class="timeout" if reason else None)


def timed_out(kind: ProbeKind, t: Target, elapsed_ms: float) -> ProbeResult:
    return make_result(kind, t, ProbeVerdict.FAILED, f"timed out after {elapsed_ms:.0f} ms")


Run = Callable[[ProbeKind, Target], Coroutine[Any, Any, ProbeResult]]


def scheduler(vt: VirtualTime, tgts: list[Target], run: Run, results: list[ProbeResult], *,
              kinds: list[ProbeKind] = KINDS, interval_s: float = 30.0, jitter: float = 0.1,
              timeout_s: float = 5.0, max_concurrent: int = 1024, seed: int = 7) -> ProbeScheduler:
    return ProbeScheduler(tgts, kinds, run, results.append, interval_s=interval_s, jitter=jitter,
                          timeout_s=timeout_s, max_concurrent=max_concurrent, timed_out=timed_out,
                          clock=vt.clock, sleep=vt.sleep, rng=random.Random(seed))


async def drive(vt: VirtualTime, sched: ProbeScheduler, until: float) -> None:
    task = asyncio.create_task(sched.run_forever())
    await vt.run_until(until)
    sched.stop()
    await task


def test_200_instances_by_3_kinds_spread_evenly_over_the_period() -> None:
    vt = VirtualTime()
    starts: list[tuple[float, str, ProbeKind]] = []

    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        starts.append((vt.now, t.instance, kind))
        return make_result(kind, t)

    results: list[ProbeResult] = []
    sched = scheduler(vt, targets(200), run, results)
    asyncio.run(drive(vt, sched, 60.0))
    assert len(starts) == 1200 and len(results) == 1200
    assert set(Counter((i, k) for _, i, k in starts).values()) == {2}
    buckets = Counter(int(t // 1.5) for t, _, _ in starts)  # 1/20 of the period
    assert max(buckets.values()) <= 33  # 30 expected; no burst
    assert max(sched.slips) == 0.0 and sched.skipped == Counter()


def test_jitter_is_bounded_by_the_slot_width_and_seeded() -> None:
    vt = VirtualTime()

    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        return make_result(kind, t)

    tg = targets(20)
    sched = scheduler(vt, tg, run, [], jitter=0.5, interval_s=60.0)
    width = 60.0 / 60
    index = {(t.instance, k): i for i, (t, k) in enumerate((t, k) for t in tg for k in KINDS)}
    plan = sched.plan(100.0)
    assert len(plan) == 60
    shifts = [due - (100.0 + (index[(t.instance, k)] + 0.5) * width) for due, t, k in plan]
    assert max(abs(s) for s in shifts) <= 0.5 * width + 1e-9
    assert max(abs(s) for s in shifts) > 0.1 * width
    assert all(100.0 <= due < 160.0 for due, _, _ in plan)
    again = scheduler(vt, tg, run, [], jitter=0.5, interval_s=60.0).plan(100.0)
    assert [d for d, _, _ in again] == [d for d, _, _ in plan]


def test_a_hung_probe_times_out_as_failed_and_the_others_keep_their_slots() -> None:
    vt = VirtualTime()
    starts: dict[str, list[float]] = {}
    hang = asyncio.Event

    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        starts.setdefault(t.instance, []).append(vt.now)
        if t.instance == "i001":
            await hang().wait()
        return make_result(kind, t)

    results: list[ProbeResult] = []
    sched = scheduler(vt, targets(4), run, results, kinds=[ProbeKind.SYNTAX], interval_s=10.0, jitter=0.0,
                      timeout_s=4.0)
    asyncio.run(drive(vt, sched, 30.0))
    assert starts == {f"i00{j}": [1.25 + 2.5 * j + 10 * c for c in range(3)] for j in range(4)}
    hung = [r for r in results if r.instance == "i001"]
    assert [r.verdict for r in hung] == [ProbeVerdict.FAILED] * 3
    assert hung[0].reason == "timed out after 4000 ms"
    assert all(r.verdict is ProbeVerdict.OK for r in results if r.instance != "i001")
    assert set(sched.slips) == {0.0} and sched.in_flight() == 0


def test_max_concurrent_is_respected() -> None:
    vt = VirtualTime()
    running = 0
    peak = 0

    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await vt.sleep(3.0)
        running -= 1
        return make_result(kind, t)

    results: list[ProbeResult] = []
    sched = scheduler(vt, targets(10), run, results, kinds=[ProbeKind.LATENCY], interval_s=10.0,
                      jitter=0.0, timeout_s=20.0, max_concurrent=2)
    asyncio.run(drive(vt, sched, 19.0))
    assert peak == 2
    assert max(sched.slips) > 0  # queued behind the semaphore: started late, and the slip shows it


def test_a_probe_still_running_at_its_next_slot_is_skipped_not_stacked() -> None:
    vt = VirtualTime()
    calls = 0

    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        nonlocal calls
        calls += 1
        await vt.sleep(25.0)
        return make_result(kind, t)

    skipped: list[ProbeKind] = []
    results: list[ProbeResult] = []
    sched = ProbeScheduler(targets(1), [ProbeKind.SEMANTIC], run, results.append, interval_s=10.0, jitter=0.0,
                           timeout_s=100.0, max_concurrent=4, timed_out=timed_out, clock=vt.clock,
                           sleep=vt.sleep, rng=random.Random(1), on_skip=skipped.append)
    asyncio.run(drive(vt, sched, 40.0))  # slots at 5, 15, 25, 35: the first runs until 30
    assert calls == 2 and len(results) == 1
    assert sched.skipped == Counter({ProbeKind.SEMANTIC: 2}) and skipped == [ProbeKind.SEMANTIC] * 2


def test_on_result_errors_are_contained_and_last_result_at_moves() -> None:
    vt = VirtualTime()

    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        if t.instance == "i000":
            raise ValueError("runner bug")
        return make_result(kind, t)

    seen: list[ProbeResult] = []

    def on_result(r: ProbeResult) -> None:
        seen.append(r)
        raise RuntimeError("sink down")

    sched = ProbeScheduler(targets(2), [ProbeKind.SYNTAX], run, on_result, interval_s=10.0, jitter=0.0,
                           timeout_s=1.0, max_concurrent=4, timed_out=timed_out, clock=vt.clock,
                           sleep=vt.sleep, rng=random.Random(1))
    assert sched.last_result_at() is None
    asyncio.run(drive(vt, sched, 20.0))
    assert len(seen) == 4 and sched.last_result_at() == 17.5
    bug = [r for r in seen if r.instance == "i000"]
    assert bug[0].verdict is ProbeVerdict.FAILED and bug[0].error_class == "exception"
    assert "runner bug" in bug[0].reason


def test_set_targets_applies_to_the_fleet() -> None:
    vt = VirtualTime()
    probed: Counter[str] = Counter()

    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        probed[t.instance] += 1
        return make_result(kind, t)

    tg = targets(3)
    sched = scheduler(vt, tg, run, [], kinds=[ProbeKind.SYNTAX], interval_s=9.0, jitter=0.0)

    async def main() -> None:
        task = asyncio.create_task(sched.run_forever())
        await vt.run_until(8.0)
        sched.set_targets([tg[0], Target(instance="new", model="m", url="http://new")])
        await vt.run_until(18.0)
        sched.stop()
        await task

    asyncio.run(main())
    assert probed == Counter({"i000": 2, "i001": 1, "i002": 1, "new": 1})
