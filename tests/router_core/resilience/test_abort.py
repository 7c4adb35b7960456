"""Abort: ends one attempt's timeout now, with the reason the attempt records; a no-op outside the attempt."""

from __future__ import annotations

import asyncio

import pytest

from router_core.resilience.fallbacks import Abort


def test_fire_ends_the_attempt_with_its_reason_and_only_the_first_reason_counts() -> None:
    async def main() -> None:
        abort = Abort()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(60) as abort.cm:
                asyncio.get_running_loop().call_soon(abort.fire, "hedged_out")
                asyncio.get_running_loop().call_soon(abort.fire)  # a breaker, a moment later
                await asyncio.sleep(60)
        assert abort.fired and abort.reason == "hedged_out"

    asyncio.run(main())


def test_fire_before_the_attempt_started_or_after_it_ended_does_nothing() -> None:
    async def main() -> None:
        abort = Abort()
        abort.fire("hedged_out")  # not started: no timeout yet
        assert not abort.fired
        async with asyncio.timeout(60) as abort.cm:
            await asyncio.sleep(0)
        abort.fire("hedged_out")  # ended (its twin settled a moment too late): no error, nothing recorded
        assert not abort.fired and abort.reason == "breaker_open"

    asyncio.run(main())
