"""Small asyncio helpers shared by the serving processes' background tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_all"]


async def cancel_all(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel background tasks (None entries are skipped), wait until they have ended, forget them.

    A list passed in is emptied, so a second call (a repeated shutdown) has nothing to do.
    """
    live = [task for task in tasks if task is not None]
    for task in live:
        task.cancel()
    await asyncio.gather(*live, return_exceptions=True)
    if isinstance(tasks, list):
        tasks.clear()
