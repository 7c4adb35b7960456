"""The fault book: exact start and end times on a virtual clock, and the effects it reports."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sim.clock import VirtualClock
from sim.faults import FaultBook, FaultKind, FaultSpec


def _book() -> tuple[FaultBook, VirtualClock, list[tuple[str, str, str | None]]]:
    clock = VirtualClock(start=100.0, epoch0=1_000.0)
    events: list[tuple[str, str, str | None]] = []
    book = FaultBook("i-0", clock, lambda event, r: events.append((event, r.kind.value, r.end_reason)))
    return book, clock, events


def test_a_fault_with_a_duration_ends_exactly_when_due_even_if_noticed_late():
    book, clock, events = _book()
    record = book.inject(FaultSpec(kind="slow", factor=3, duration_s=10))
    assert record.started_at == 1_000.0 and book.active() == [record]
    clock.advance(9.9)
    assert book.expire() == [] and book.slow_factor() == 3.0
    clock.advance(5.0)
    assert book.expire() == [record]
    assert record.ended_at == pytest.approx(1_010.0) and record.end_reason == "duration"
    assert book.active() == [] and book.slow_factor() == 1.0
    assert events == [("start", "slow", None), ("end", "slow", "duration")]


def test_end_is_idempotent_and_by_id_finds_past_faults():
    book, clock, events = _book()
    record = book.inject(FaultSpec(kind="drift"))
    clock.advance(2)
    book.end(record, "cleared")
    book.end(record, "cleared")
    assert record.ended_at == pytest.approx(1_002.0) and len(events) == 2
    assert book.by_id(record.id) is record and book.by_id("nope") is None


def test_probabilities_of_several_faults_of_one_kind_combine():
    book, _, _ = _book()
    assert book.probability(FaultKind.ERROR) == (0.0, None)
    book.inject(FaultSpec(kind="error", rate=0.5))
    last = book.inject(FaultSpec(kind="error", rate=0.5))
    assert book.probability(FaultKind.ERROR) == (0.75, last)
    assert book.probability(FaultKind.RATELIMIT)[0] == 0.0
    book.inject(FaultSpec(kind="ratelimit"))
    assert book.probability(FaultKind.RATELIMIT)[0] == 1.0


def test_leak_grows_with_time_and_slows_requests():
    book, clock, _ = _book()
    book.inject(FaultSpec(kind="leak", rate=0.3))
    assert book.leak_fraction() == 0.0
    clock.advance(60)
    assert book.leak_fraction() == pytest.approx(0.3)
    assert book.slow_factor() == pytest.approx(1 + 4 * 0.3)
    clock.advance(600)
    assert book.leak_fraction() == 0.9


def test_flap_reports_its_level_in_the_first_half_of_each_period():
    book, clock, _ = _book()
    book.inject(FaultSpec(kind="flap", rate=0.97, period_s=4))
    seen = []
    for _ in range(8):
        seen.append(book.flap_level())
        clock.advance(1)
    assert seen == [0.97, 0.97, None, None, 0.97, 0.97, None, None]


@pytest.mark.parametrize("body", [{"kind": "meltdown"}, {"kind": "error", "rate": 1.5}, {"kind": "slow", "factor": 0.5},
                                  {"kind": "crash", "duration_s": 0}, {"kind": "hang", "surprise": 1}])
def test_bad_fault_specs_are_rejected(body):
    with pytest.raises(ValidationError):
        FaultSpec.model_validate(body)


def test_a_leak_rate_is_not_a_probability():
    assert FaultSpec(kind="leak", rate=2.0).rate == 2.0
