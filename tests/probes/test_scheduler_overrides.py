"""An instance with fewer probe kinds, or probed only every n-th period (a paid provider's), in the schedule."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest

from probes.scheduler import ProbeScheduler
from probes.types import Target
from schemas.common import ProbeKind
from schemas.probe import ProbeResult
from tests.probes.test_scheduler import VirtualTime, drive, make_result, targets, timed_out

KINDS = list(ProbeKind)


def _scheduler(vt: VirtualTime, tgts: list[Target], starts: list[tuple[float, str, ProbeKind]], *,
               kinds_of: Mapping[str, Sequence[ProbeKind]] | None = None,
               every: Mapping[str, int] | None = None) -> ProbeScheduler:
    async def run(kind: ProbeKind, t: Target) -> ProbeResult:
        starts.append((vt.now, t.instance, kind))
        return make_result(kind, t)

    return ProbeScheduler(tgts, KINDS, run, lambda _: None, interval_s=30.0, jitter=0.1, timeout_s=5.0,
                          max_concurrent=64, timed_out=timed_out, clock=vt.clock, sleep=vt.sleep,
                          rng=random.Random(3), kinds_of=kinds_of, every=every)


def test_an_instance_gets_only_its_kinds_and_only_every_nth_period() -> None:
    vt = VirtualTime()
    starts: list[tuple[float, str, ProbeKind]] = []
    tg = targets(3)  # i000 as configured; i001 syntax only, every 4th period; i002 latency only
    sched = _scheduler(vt, tg, starts, kinds_of={"i001": [ProbeKind.SYNTAX], "i002": [ProbeKind.LATENCY]},
                       every={"i001": 4})
    asyncio.run(drive(vt, sched, 240.0))  # periods 0..7
    per = Counter((i, k) for _, i, k in starts)
    assert {k: per[("i000", k)] for k in KINDS} == {k: 8 for k in KINDS}
    assert per[("i001", ProbeKind.SYNTAX)] == 2 and per[("i001", ProbeKind.LATENCY)] == 0
    assert per[("i001", ProbeKind.SEMANTIC)] == 0
    assert sorted(int(t // 30) for t, i, _ in starts if i == "i001") == [0, 4]  # periods 0 and 4
    assert per[("i002", ProbeKind.LATENCY)] == 8 and per[("i002", ProbeKind.SYNTAX)] == 0
    assert len(starts) == 8 * 3 + 2 + 8  # 34 requests, not 72


def test_periods_without_an_instance_spread_the_others_over_the_whole_period() -> None:
    vt = VirtualTime()
    starts: list[tuple[float, str, ProbeKind]] = []
    sched = _scheduler(vt, targets(2), starts, every={"i001": 2})
    odd = sched.plan(30.0, 1)
    assert {t.instance for _, t, _ in odd} == {"i000"} and len(odd) == 3
    assert max(s for s, _, _ in odd) > 30.0 + 15.0  # three slots over the whole period, not the first half
    even = sched.plan(60.0, 2)
    assert Counter(t.instance for _, t, _ in even) == {"i000": 3, "i001": 3}


def test_an_instance_with_no_kinds_left_has_no_slot_and_every_below_one_is_refused() -> None:
    vt = VirtualTime()
    sched = _scheduler(vt, targets(2), [], kinds_of={"i001": []})
    assert {t.instance for _, t, _ in sched.plan(0.0)} == {"i000"}
    with pytest.raises(ValueError, match="every must be >= 1"):
        _scheduler(vt, targets(1), [], every={"i000": 0})
