"""bench.openloop: requests start on schedule, each on its own task, and every one is awaited."""

from __future__ import annotations

import asyncio
import threading

from bench.openloop import open_loop


def test_count_starts_that_many_and_waits_for_each_even_when_they_overlap() -> None:
    running, most, done = 0, 0, []

    async def send() -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)  # longer than the 1/rps gap: an open loop does not wait for it
        running -= 1
        done.append(1)

    asyncio.run(open_loop(200, send, count=10))
    assert len(done) == 10 and running == 0 and most > 1


def test_stop_ends_the_schedule() -> None:
    stop, sent = threading.Event(), []

    async def send() -> None:
        sent.append(1)
        if len(sent) == 5:
            stop.set()

    asyncio.run(open_loop(1000, send, count=100, stop=stop))
    assert len(sent) in (5, 6)  # the one started before the fifth ran still runs; none after
