"""cancel_all: every task ends cancelled, None entries are skipped, a list passed in is emptied."""

from __future__ import annotations

import asyncio

from router_core.aio import cancel_all


def test_cancel_all_ends_every_task_and_forgets_a_list() -> None:
    async def run() -> tuple[list[bool], int]:
        tasks = [asyncio.create_task(asyncio.sleep(60)) for _ in range(3)]
        kept = list(tasks)
        await cancel_all(tasks)
        done = [t.cancelled() for t in kept]
        lone = asyncio.create_task(asyncio.sleep(60))
        await cancel_all((None, lone))
        return done + [lone.cancelled()], len(tasks)

    assert asyncio.run(run()) == ([True] * 4, 0)
