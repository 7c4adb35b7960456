"""Hedged requests: the first attempt alone for a while, then a twin; the first answer wins.

:func:`race` runs the first attempt for ``delay`` seconds; still out by then, it starts the twin
(:class:`router_core.gateway.forward.Forwarder` sends it to the next instance the fallbacks and
breakers allow) and returns as soon as either has settled the request (an answer, or an error
status that is one). The other is cancelled with :data:`HEDGED_OUT`, which an attempt takes as
"record me as hedged out" (a ``timeout`` whose error class is ``hedged_out``), so both attempts
are in the trace in the order they were sent. When neither settles, both are returned, failed.
Settings: ``resilience.hedging`` (:class:`schemas.config.resilience.HedgeSettings`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["HEDGED_OUT", "race"]

HEDGED_OUT = "hedged_out"
T = TypeVar("T")


async def race(first: Awaitable[T], delay_s: float, twin: Callable[[], Awaitable[T] | None],
               settled: Callable[[T], bool]) -> list[T]:
    """The results of ``first`` and, if it outlasts ``delay_s``, of its twin (``twin()``; None: no instance left).

    The loser of a race is cancelled with :data:`HEDGED_OUT` and its own record returned; the
    client going away cancels both.
    """
    a = asyncio.ensure_future(first)
    tasks = [a]
    try:
        done, _ = await asyncio.wait(tasks, timeout=delay_s)
        if done:
            return [a.result()]
        second = twin()
        if second is None:
            return [await a]
        tasks.append(asyncio.ensure_future(second))
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(settled(t.result()) for t in done) and pending:
                for t in pending:
                    t.cancel(HEDGED_OUT)
                await asyncio.wait(pending)
                break
        return [t.result() for t in tasks]
    finally:
        for t in tasks:
            if not t.done():  # the request itself was cancelled: its attempts go with it
                t.cancel()
