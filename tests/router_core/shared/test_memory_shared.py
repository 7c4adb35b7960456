"""MemoryShared's bindings (session affinity, one process): bounded, the least recently bound dropped first."""

from __future__ import annotations

import asyncio

from router_core.shared.base import MemoryShared


def test_bindings_are_bounded_and_the_least_recently_bound_goes_first() -> None:
    now = [0.0]
    shared = MemoryShared(lambda: now[0], max_bindings=3)

    async def run() -> str:
        for key in ("a", "b", "c"):
            await shared.bind(key, f"i-{key}", 60)
        assert await shared.bind("a", "other", 60) == "i-a"  # renewed: now the most recent
        await shared.bind("d", "i-d", 60)  # one over: "b", the least recently bound, goes
        await shared.rebind("e", "i-e", 60)  # and then "c"
        return await shared.bind("b", "i-new", 60)

    assert asyncio.run(run()) == "i-new"  # "b" was forgotten: bound anew
    assert list(shared._bindings) == ["d", "e", "b"]  # "a" went for it


def test_an_expired_binding_is_replaced() -> None:
    now = [0.0]
    shared = MemoryShared(lambda: now[0])

    async def run() -> tuple[str, str]:
        first = await shared.bind("s", "i-1", 10)
        now[0] = 11.0
        return first, await shared.bind("s", "i-2", 10)

    assert asyncio.run(run()) == ("i-1", "i-2")


def test_held_reads_a_binding_without_renewing_or_making_one() -> None:
    now = [0.0]
    shared = MemoryShared(lambda: now[0])
    assert shared.held("s") is None
    asyncio.run(shared.bind("s", "i-1", 10))
    now[0] = 9.0
    assert shared.held("s") == "i-1"
    now[0] = 11.0  # not renewed by the read: expired at 10
    assert shared.held("s") is None and asyncio.run(shared.bind("s", "i-2", 10)) == "i-2"
