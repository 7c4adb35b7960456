"""Polling for a condition in tests (a deadline, never a timing assertion)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout_s: float = 60, every: float = 0.2) -> T:
    """Call ``check`` every ``every`` seconds until it returns something truthy or ``timeout_s`` passes; return that."""
    deadline = time.monotonic() + timeout_s
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(every)
    return value


async def wait_until_async(check: Callable[[], T], timeout_s: float = 2.0, every: float = 0.02) -> T:
    """:func:`wait_until` inside an event loop: the loop runs while it waits."""
    deadline = time.monotonic() + timeout_s
    while not (value := check()) and time.monotonic() < deadline:
        await asyncio.sleep(every)
    return value
