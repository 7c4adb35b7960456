"""Token buckets per rule: a burst overflows as configured, the bucket refills, waiters queue by priority."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from router_core.rules.ir import Origin, Rule, Throttle
from router_core.rules.throttle import Admission, Throttles, TokenBucket
from router_core.shared.base import MemoryShared
from router_core.shared.redis_shared import RedisShared
from tests.redis_server import RedisServer, redis_server
from tests.router_core.shared.redis_pair import QUIET, run_pair

__all__ = ["redis_server"]  # the fixture, imported for pytest

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


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_waiters_get_tokens_by_priority_then_arrival_and_give_up_after_max_wait(shared: bool) -> None:
    # real time: 20 tokens a second, one at a time; `serve` always passes a shared state (in memory for one worker)
    throttles = Throttles(shared=MemoryShared() if shared else None)
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


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_a_bucket_shows_its_tokens_once_taken_from(shared: bool) -> None:
    clock = Clock()
    throttles = Throttles(clock, shared=MemoryShared(clock) if shared else None)
    r = rule("r", bucket="b")
    assert throttles.tokens("b") is None

    async def two() -> None:
        await throttles.admit(r)
        await throttles.admit(r)

    asyncio.run(two())
    assert throttles.tokens("b") == pytest.approx(1.0)  # a burst of 3, two taken


def test_a_shared_waiter_that_gives_up_leaves_the_token_to_the_next() -> None:
    throttles = Throttles(shared=MemoryShared())  # real time: 10 tokens a second, one at a time
    patient = rule("patient", 0, rate=10.0, burst=1.0, overflow="wait", max_wait_s=2.0, bucket="b")
    brief = rule("brief", 5, rate=10.0, burst=1.0, overflow="wait", max_wait_s=0.15, bucket="b")

    async def run() -> tuple[str | None, str | None, str | None]:
        assert (await throttles.admit(patient)).action is None  # takes the one token
        first = asyncio.create_task(throttles.admit(brief))  # first in line (higher priority)...
        await asyncio.sleep(0)
        second = asyncio.create_task(throttles.admit(brief))
        await asyncio.sleep(0)
        third = asyncio.create_task(throttles.admit(patient))  # ...this one waits out the others
        got = await asyncio.gather(first, second, third)
        return got[0].action, got[1].action, got[2].action

    assert asyncio.run(run()) == ("wait", "reject", "wait")


def test_a_shared_bucket_serves_a_later_higher_priority_waiter_first() -> None:
    # A shared store's clock is coarser than ours (Redis answers a lease refill, not each take): here
    # 0.1 s ticks, so each waiter's own retry would come due by its arrival, the earliest first.
    tick = 0.1
    shared = MemoryShared(lambda: math.floor(time.monotonic() / tick) * tick)
    throttles = Throttles(shared=shared)
    low, high = rule("low", 0, rate=10.0, burst=1.0, overflow="wait", max_wait_s=2.0, bucket="b"), \
        rule("high", 2, rate=10.0, burst=1.0, overflow="wait", max_wait_s=2.0, bucket="b")

    async def run() -> list[str]:
        await asyncio.sleep(tick - time.monotonic() % tick + 0.005)  # just past a tick: all arrive within one
        assert (await throttles.admit(low)).action is None  # takes the one token
        order: list[str] = []

        async def one(r: Rule, tag: str) -> None:
            assert (await throttles.admit(r)).action == "wait"
            order.append(tag)

        tasks = [asyncio.create_task(one(low, "low-1")), asyncio.create_task(one(low, "low-2"))]
        await asyncio.sleep(0.03)
        tasks.append(asyncio.create_task(one(high, "high")))
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(run()) == ["high", "low-1", "low-2"]


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_a_waiter_says_how_long_it_waited_on_the_injected_clock_whether_a_token_came_or_not(shared: bool) -> None:
    # The clock is the test's: the event loop times the retries and max_wait, the clock says what was waited.
    clock = Clock()
    throttles = Throttles(clock, shared=MemoryShared(clock) if shared else None)
    r = rule("r", rate=10.0, burst=1.0, overflow="wait", max_wait_s=0.3)

    async def waiting(advance: float) -> Admission:
        assert (await throttles.admit(r)).waited_s is None  # a token at once: no wait
        task = asyncio.create_task(throttles.admit(r))
        await asyncio.sleep(0)  # queued (the next token is 0.1 s away, within max_wait)
        clock.t += advance
        return await task

    came = asyncio.run(waiting(0.25))  # two and a half tokens' time: the next retry finds one
    assert (came.admitted, came.action, came.waited_s) == (True, "wait", 0.25)
    clock.t += 1.0  # the bucket full again
    ran_out = asyncio.run(waiting(0.05))  # half a token: none comes before max_wait (0.3 s of the loop's time)
    assert (ran_out.admitted, ran_out.action, ran_out.waited_s) == (False, "reject", 0.05)


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_a_request_that_never_queued_has_no_waited_time(shared: bool) -> None:
    clock = Clock()
    throttles = Throttles(clock, shared=MemoryShared(clock) if shared else None)
    one = {"rate": 1.0, "burst": 1.0, "bucket": "b"}  # one token a second, one at a time
    longer = rule("w", overflow="wait", max_wait_s=0.5, **one)  # the next token is further than its max_wait

    async def run() -> list[Admission]:
        return [await throttles.admit(x) for x in (longer, longer, rule("c", overflow="chain", **one),
                                                   rule("r", overflow="reject", **one))]

    got = asyncio.run(run())
    assert [a.action for a in got] == [None, "reject", "chain", "reject"]
    assert [a.waited_s for a in got] == [None] * 4  # refused at once: the wait would pass max_wait


def test_a_bucket_shared_in_redis_says_how_long_its_waiters_waited(redis_server: RedisServer) -> None:
    # real time and a real Redis (replica a of two): 5 tokens a second, one at a time
    patient = rule("patient", 2, rate=5.0, burst=1.0, overflow="wait", max_wait_s=2.0, bucket="b")
    brief = rule("brief", 0, rate=5.0, burst=1.0, overflow="wait", max_wait_s=0.3, bucket="b")

    async def body(a: RedisShared, _: RedisShared) -> None:
        on_a = Throttles(shared=a)
        assert (await on_a.admit(patient)).action is None  # takes the one token
        first = asyncio.create_task(on_a.admit(patient))  # served first (higher priority): the next token, ~0.2 s
        await asyncio.sleep(0)
        second = await on_a.admit(brief)  # its turn would come ~0.4 s on: max_wait (0.3 s) runs out first
        got = await first
        assert (got.action, second.action) == ("wait", "reject")
        assert got.waited_s is not None and 0.05 < got.waited_s < 2.0
        assert second.waited_s is not None and second.waited_s >= 0.29  # its max_wait (0.3 s), waited out
        assert a.fallbacks == 0  # Redis answered every take: the shared path, not the local fallback

    run_pair(redis_server.url, body, beat_again=True, **QUIET, timeout_s=1.0)


@pytest.mark.parametrize("shared", [False, True], ids=["local", "shared"])
def test_a_token_handed_over_as_max_wait_runs_out_admits_the_request(shared: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The token given in the loop turn the waiter's max_wait fires was taken for it: the request goes, not a 429.

    ``asyncio.wait_for`` is made to time out just after the token is handed over (the race, made certain).
    """
    clock = Clock()
    throttles = Throttles(clock, shared=MemoryShared(clock) if shared else None)
    r = rule("r", rate=10.0, burst=1.0, overflow="wait", max_wait_s=0.3)
    real_wait_for = asyncio.wait_for

    async def token_then_timeout(aw: asyncio.Future[None], timeout: float | None) -> None:
        clock.t += 0.3  # a token is due, and so is max_wait
        try:
            await real_wait_for(asyncio.shield(aw), 5.0)  # the release or the pump hands the token over
        finally:
            raise TimeoutError

    async def run() -> Admission:
        assert (await throttles.admit(r)).admitted
        monkeypatch.setattr("router_core.rules.throttle.asyncio.wait_for", token_then_timeout)
        return await throttles.admit(r)

    got = asyncio.run(run())
    assert (got.admitted, got.action, got.waited_s) == (True, "wait", 0.3)
