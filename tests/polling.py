"""Polling for a condition in tests (a deadline, never a timing assertion)."""

from __future__ import annotations

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
