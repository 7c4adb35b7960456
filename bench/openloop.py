"""Open-loop load: a request every ``1/rps`` seconds, each on its own task, whatever the others do.

A closed loop (the next request once the last is answered) slows down with the server and hides
its stalls; an open loop keeps the schedule, so a stall shows as requests piling up, as it would
in production. The caller's ``send`` makes one request and records what it needs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["open_loop"]


async def open_loop(rps: float, send: Callable[[], Coroutine[Any, Any, None]], *, count: int | None = None,
                    stop: threading.Event | None = None) -> None:
    """Start ``send()`` on schedule until ``count`` are started or ``stop`` is set, then wait for all of them."""
    start, i = time.monotonic(), 0
    tasks: list[asyncio.Task[None]] = []
    while (count is None or i < count) and not (stop is not None and stop.is_set()):
        await asyncio.sleep(max(0.0, start + i / rps - time.monotonic()))
        tasks.append(asyncio.create_task(send()))
        i += 1
    await asyncio.gather(*tasks)
