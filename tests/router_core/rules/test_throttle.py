"""Token buckets per rule: a burst overflows as configured, the bucket refills, waiters queue by priority."""

from __future__ import annotations

import asyncio

import pytest

from router_core.rules.ir import Origin, Rule, Throttle
from router_core.rules.throttle import Throttles, TokenBucket

AT = Origin("p.yaml", 1)


def rule(name: str = "r", priority: int = 1, **throttle: object) -> Rule:
    spec = {"rate": 10.0, "burst": 3.0, **throttle}
    return Rule(name=name, origin=AT, priority=priority, throttle=Throttle(**spec))  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_bucket_holds_its_burst_and_refills_at_its_rate() -> None:
    b = TokenBucket(rate=10, burst=3, at=0.0)
    assert [b.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert b.wait_s(0.0) == pytest.approx(0.1)
    assert not b.take(0.05) and b.take(0.1)  # one token a tenth of a second
    assert [b.take(10.0) for _ in range(4)] == [True, True, True, False]  # refills to the burst, no further


@pytest.mark.parametrize("overflow", ["chain", "reject"])
def test_a_burst_above_the_rate_overflows_as_configured_and_the_bucket_refills(overflow: str) -> None:
    clock = Clock()
    throttles = Throttles(clock)
    r = rule(overflow=overflow)

    async def burst() -> list[str | None]:
        return [(await throttles.admit(r)).action for _ in range(5)]

    assert asyncio.run(burst()) == [None, None, None, overflow, overflow]
    refused = asyncio.run(throttles.admit(r))
    assert refused.retry_after_s == pytest.approx(0.1)
    clock.t += 0.25  # two tokens back
    assert asyncio.run(burst()) == [None, None, overflow, overflow, overflow]


def test_rules_sharing_a_bucket_share_its_tokens_and_others_do_not() -> None:
    throttles = Throttles(Clock())
    a, b, c = rule("a", bucket="shared"), rule("b", bucket="shared"), rule("c")

    async def run() -> list[str | None]:
        return [(await throttles.admit(x)).action for x in (a, b, a, b, c, c, c)]

    assert asyncio.run(run()) == [None, None, None, "chain", None, None, None]


def test_waiters_get_tokens_by_priority_then_arrival_and_give_up_after_max_wait() -> None:
    throttles = Throttles()  # real time: 20 tokens a second, one at a time
    low, high = rule("low", 0, rate=20.0, burst=1.0, overflow="wait", max_wait_s=2.0, bucket="b"), \
        rule("high", 2, rate=20.0, burst=1.0, overflow="wait", max_wait_s=2.0, bucket="b")
    impatient = rule("impatient", 1, rate=20.0, burst=1.0, overflow="wait", max_wait_s=0.0, bucket="b")

    async def run() -> tuple[list[str], str | None]:
        order: list[str] = []
        assert (await throttles.admit(low)).action is None  # takes the one token

        async def one(r: Rule, tag: str) -> None:
            adm = await throttles.admit(r)
            assert adm.admitted and adm.action == "wait" and adm.waited_s > 0
            order.append(tag)

        tasks = [asyncio.create_task(one(low, "low-1")), asyncio.create_task(one(low, "low-2"))]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(one(high, "high")))  # queued last, served first
        await asyncio.sleep(0)
        refused = (await throttles.admit(impatient)).action  # would wait longer than its max_wait: refused
        await asyncio.gather(*tasks)
        return order, refused

    order, refused = asyncio.run(run())
    assert order == ["high", "low-1", "low-2"] and refused == "reject"
