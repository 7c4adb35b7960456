"""Hedged requests: the first attempt alone for a while, then a twin; the first answer wins.

:func:`race` awaits the first attempt in the request's own task; a timer starts the twin after
``delay`` seconds if the first is still out (:class:`router_core.gateway.forward.Forwarder` sends
it to the next instance the fallbacks and breakers allow), as a task of its own. Whichever settles
the request first (an answer, or an error status that is one) wins. The first attempt, outrun, is
ended through its own timeout (:meth:`router_core.resilience.fallbacks.Abort.fire` with
:data:`HEDGED_OUT`, as an opening breaker ends it); the twin, outrun, is cancelled with
:data:`HEDGED_OUT`. Either takes it as "record me as hedged out" (a ``timeout`` whose error class
is ``hedged_out``), so both attempts are in the trace in the order they were sent (a twin started in
the turn the first answered in runs its first step before it is cancelled). When neither
settles, both are returned, failed. A request answered before the delay (nearly every one) pays
for one timer: no task, no extra turn of the event loop.
Settings: ``resilience.hedging`` (:class:`schemas.config.resilience.HedgeSettings`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from router_core.resilience.fallbacks import Abort

__all__ = ["HEDGED_OUT", "race"]

HEDGED_OUT = "hedged_out"
T = TypeVar("T")


async def race(first: Awaitable[T], abort: Abort, delay_s: float, twin: Callable[[], Awaitable[T] | None],
               settled: Callable[[T], bool]) -> list[T]:
    """The results of ``first`` and, if it outlasts ``delay_s``, of its twin (``twin()``; None: no instance left).

    ``abort`` ends ``first`` (its timeout) when the twin settles first. The client going away
    (the request's task cancelled) cancels both.
    """
    second: asyncio.Future[T] | None = None

    def twin_done(done: asyncio.Future[T]) -> None:  # after the first has returned, fire() is a no-op
        if not done.cancelled() and done.exception() is None and settled(done.result()):
            abort.fire(HEDGED_OUT)

    def start_twin() -> None:
        nonlocal second
        made = twin()
        if made is not None:
            second = asyncio.ensure_future(made)
            second.add_done_callback(twin_done)

    timer = asyncio.get_running_loop().call_later(delay_s, start_twin)
    try:
        a = await first
    except BaseException:
        if second is not None:  # the request itself was cancelled: its attempts go with it
            second.cancel()
        raise
    finally:
        timer.cancel()
    if second is None:
        return [a]
    try:
        if settled(a) and not second.done():
            # One turn first: a twin started in this turn has not run yet, and a task cancelled before its first
            # step runs none of its code (neither its record as hedged out nor the release of its in-flight count).
            await asyncio.sleep(0)
            if not second.done():
                second.cancel(HEDGED_OUT)
        await asyncio.wait([second])
    except BaseException:  # the request itself was cancelled
        second.cancel()
        raise
    if second.cancelled():  # it did not take HEDGED_OUT as "record me": better an attempt untold than a request lost
        return [a]
    return [a, second.result()]
