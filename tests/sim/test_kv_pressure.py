"""kv-pressure: KV blocks a neighbour holds, rising over period_s, held, falling back before the end."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from schemas.config.sim import SimModelProfile, SimSettings
from sim.clock import VirtualClock
from sim.engine import SimEngine
from sim.faults import FaultBook, FaultSpec


def _book() -> tuple[FaultBook, VirtualClock]:
    clock = VirtualClock(start=100.0, epoch0=1_000.0)
    return FaultBook("i-0", clock), clock


def test_it_rises_holds_and_falls_back_within_its_duration() -> None:
    book, clock = _book()
    book.inject(FaultSpec(kind="kv-pressure", rate=0.8, period_s=10, duration_s=40))
    seen = []
    for _ in range(9):
        seen.append(round(book.pressure_fraction(), 6))
        clock.advance(5)
        book.expire()
    # 0 s, 5 s (half way up), 10-30 s (held), 35 s (half way down), 40 s and after: gone
    assert seen == [0.0, 0.4, 0.8, 0.8, 0.8, 0.8, 0.8, 0.4, 0.0]
    assert book.active() == []


def test_two_pressures_add_up_and_with_a_leak_never_hold_the_whole_cache() -> None:
    book, clock = _book()
    book.inject(FaultSpec(kind="kv-pressure", rate=0.82, period_s=1))
    book.inject(FaultSpec(kind="kv-pressure", rate=0.13, period_s=1))
    clock.advance(2)
    assert book.pressure_fraction() == pytest.approx(0.95)
    book.inject(FaultSpec(kind="leak", rate=6.0))
    clock.advance(10)  # the leak alone is at its 0.9 cap
    assert book.held_fraction() == pytest.approx(0.98)
    assert book.slow_factor() == pytest.approx(1 + 4 * 0.9)  # the leak slows the engine; pressure does not


def test_the_engine_counts_held_blocks_in_its_kv_usage_and_admission() -> None:
    book, clock = _book()
    profile = SimModelProfile(kv_tokens=1600, kv_block_tokens=16, max_concurrency=8)
    engine = SimEngine(profile, SimSettings(), clock, leak_fraction=book.held_fraction)
    book.inject(FaultSpec(kind="kv-pressure", rate=0.9, period_s=1))
    clock.advance(1)
    assert engine.kv_usage == pytest.approx(0.9) and engine.leaked_blocks == 90


def test_its_peak_is_a_share() -> None:
    with pytest.raises(ValidationError, match="probability"):
        FaultSpec(kind="kv-pressure", rate=1.5)
