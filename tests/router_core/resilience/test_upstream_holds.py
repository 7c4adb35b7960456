"""An upstream's 429: its Retry-After read and bounded, its instance held out that long by the board, then trialled."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import pytest

from router_core.gateway.errors import RETRY_AFTER_DEFAULT_S, RETRY_AFTER_MAX_S, retry_after_s
from router_core.resilience.breaker import BreakerState
from router_core.resilience.breakers import BreakerBoard
from router_core.resilience.hub import KEEP_SLACK_S, BreakerHub
from router_core.shared.base import MemoryShared
from schemas.config.resilience import BreakerSettings
from tests.router_core.resilience.test_breakers import Clock, board

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after": "30"}, 30.0),
    ({"retry-after": " 2.5 "}, 2.5),
    ({"retry-after-ms": "1500", "retry-after": "30"}, 1.5),  # OpenAI's header first
    ({"retry-after-ms": "soon", "retry-after": "4"}, 4.0),
    ({"retry-after": format_datetime(datetime.fromtimestamp(NOW + 12, UTC), usegmt=True)}, 12.0),
    ({"retry-after": "Thu, 04 Dec 2026 12:00:20 -0000"}, 20.0),  # a date without a zone is UTC
    ({"retry-after": format_datetime(datetime.fromtimestamp(NOW - 5, UTC), usegmt=True)}, 0.0),  # past: no wait
    ({"retry-after": "-3"}, 0.0),
    ({"retry-after": "3600"}, RETRY_AFTER_MAX_S),
    ({"retry-after": "tomorrow"}, RETRY_AFTER_DEFAULT_S),
    ({"retry-after": "nan"}, RETRY_AFTER_DEFAULT_S),
    ({}, RETRY_AFTER_DEFAULT_S),
])
def test_retry_after_is_read_as_seconds_or_a_date_and_bounded(headers: dict[str, str], seconds: float) -> None:
    assert retry_after_s(headers, NOW) == pytest.approx(seconds)


def test_a_429_holds_the_instance_for_its_retry_after_not_open_s_then_it_goes_half_open() -> None:
    clock = Clock()
    b, specs = board(clock, instance={"open_s": 5, "close_after": 1})
    aborted: list[int] = []
    out = b.admit(specs[0], lambda: aborted.append(1))  # an attempt already out when the 429 comes
    adm = b.admit(specs[0])
    assert adm is not None and out is not None
    b.done(adm, "http_429", hold_s=30.0)
    inst = b.get("instance", "i0")
    assert inst is not None and inst.state is BreakerState.OPEN and "held 30 s" in inst.reason
    assert aborted == []  # accepted attempts are not cut short
    assert b.admit(specs[0]) is None and b.held_for("i0") == 30.0
    blocked = b.blocked(specs)
    assert blocked is not None and "429" in blocked["i0"].reason
    assert [(t.scope, t.to_state) for t in b.take_transitions()] == [("instance", BreakerState.OPEN)]
    clock.t += 29.9
    b.sweep()
    assert inst.state is BreakerState.OPEN and b.held_for("i0") == pytest.approx(0.1)
    clock.t += 0.1
    b.sweep()
    assert inst.state is BreakerState.HALF_OPEN and b.held_for("i0") is None
    trial = b.admit(specs[0])
    assert trial is not None
    b.done(trial, "ok")
    assert inst.state is BreakerState.CLOSED


def test_a_429_on_a_held_or_trialled_instance_holds_it_again_and_never_counts_as_a_failure() -> None:
    clock = Clock()
    b, specs = board(clock, instance={"open_s": 5, "consecutive_failures": 2}, model={"for_s": 0, "min_requests": 5})
    late = b.admit(specs[0])
    adm = b.admit(specs[0])
    assert late is not None and adm is not None
    b.done(adm, "http_429", hold_s=2.0)
    clock.t += 1
    b.done(late, "http_429", hold_s=10.0)  # another request's 429, answered while held: the longer hold wins
    assert b.held_for("i0") == 10.0
    clock.t += 10
    b.sweep()
    trial = b.admit(specs[0])
    assert trial is not None
    b.done(trial, "http_429", hold_s=3.0)  # the trial is refused too: held again, for its own Retry-After
    inst = b.get("instance", "i0")
    assert inst is not None and inst.state is BreakerState.OPEN and b.held_for("i0") == 3.0
    # 429s are neither failures in a row nor errors of the model's share
    for _ in range(30):
        adm = b.admit(specs[1])
        assert adm is not None
        b.done(adm, "http_429", hold_s=0.0)
        clock.t += 0.5
        b.sweep()
        b.close("instance", "i1")
    model = b.get("model", "m")
    assert model is not None and model.state is BreakerState.CLOSED


def test_an_operator_close_ends_a_hold_and_a_disabled_board_holds_nothing() -> None:
    clock = Clock()
    b, specs = board(clock)
    adm = b.admit(specs[0])
    assert adm is not None
    b.done(adm, "http_429", hold_s=30.0)
    b.close("instance", "i0")
    assert b.held_for("i0") is None and b.admit(specs[0]) is not None
    off = BreakerBoard(BreakerSettings(), specs, clock=clock, enabled=False)  # resilience.enabled: false
    adm = off.admit(specs[0])
    assert adm is not None
    off.done(adm, "http_429", hold_s=30.0)
    assert off.held_for("i0") is None and off.admit(specs[0]) is not None


def test_another_replica_holds_the_instance_as_long_as_the_retry_after_not_open_s() -> None:
    # Before, the channel message carried no hold: the other workers opened the breaker for open_s (5 s)
    # and sent the provider requests for the remaining 25 s of its Retry-After.
    here_clock, there_clock = Clock(), Clock()
    here, specs = board(here_clock, instance={"open_s": 5})
    there, _ = board(there_clock, instance={"open_s": 5})
    adm = here.admit(specs[0])
    assert adm is not None
    here.done(adm, "http_429", hold_s=30.0)
    [t] = here.take_transitions()
    message = t.to_message("here")
    assert message["hold_s"] == 30.0
    assert there.apply(message) and there.held_for("i0") == 30.0
    there_clock.t += 5.0
    there.sweep()
    assert there.admit(specs[0]) is None  # past open_s: still held
    there_clock.t += 25.0
    there.sweep()
    inst = there.get("instance", "i0")
    assert inst is not None and inst.state is BreakerState.HALF_OPEN and there.held_for("i0") is None

    late, _ = board(Clock(), instance={"open_s": 5})  # a replica starting 12 s later reads the kept message
    assert late.apply({**message, "age_s": 12.0}) and late.held_for("i0") == pytest.approx(18.0)
    plain = {k: v for k, v in message.items() if k != "hold_s"}
    for bad in (-1.0, 0.0, 1e9, "30"):  # a hold no gateway sends: the breaker's own open_s
        other, _ = board(Clock(), instance={"open_s": 5})
        assert other.apply({**plain, "hold_s": bad}) and other.held_for("i0") is None
    failures = next(t for t in _opened_by_failures().take_transitions())
    assert "hold_s" not in failures.to_message("x")  # an opening for failures carries none


def _opened_by_failures() -> BreakerBoard:
    b, specs = board(Clock())
    for _ in range(3):
        adm = b.admit(specs[0])
        assert adm is not None
        b.done(adm, "timeout")
    return b


def test_the_hub_keeps_a_held_breaker_for_its_hold_so_a_replica_starting_meanwhile_holds_it_too() -> None:
    kept: list[tuple[str | None, float]] = []

    class Recording(MemoryShared):
        async def publish(self, channel: str, message: dict[str, Any], *, keep: str | None = None,
                          keep_s: float = 0.0) -> None:
            kept.append((keep, keep_s))
            await super().publish(channel, message, keep=keep, keep_s=keep_s)

    clock = Clock()
    b, specs = board(clock, instance={"open_s": 5})
    hub = BreakerHub(b, Recording(), set_gauge=lambda *_: None, emit_event=None,
                     wall=lambda: datetime(2026, 12, 7, tzinfo=UTC))
    adm = b.admit(specs[0])
    assert adm is not None
    b.done(adm, "http_429", hold_s=30.0)
    asyncio.run(hub.drain())
    assert kept == [("instance:i0", 30.0 + KEEP_SLACK_S)]  # was open_s + slack: gone after 6 s
