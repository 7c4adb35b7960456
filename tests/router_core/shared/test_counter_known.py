"""A replica's known counter totals (what a restarted Redis gets back): only those within their TTL, bounded."""

from __future__ import annotations

from router_core.shared.redis_counters import CounterBatch


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_known_totals_are_the_flushed_and_read_ones_with_the_ttl_left_and_expired_ones_are_forgotten() -> None:
    clock = Clock()
    batch = CounterBatch(clock)
    batch.add("spend", 2.0, 60)
    batch.add("short", 1.0, 5)
    batch.flushed(batch.drain(), [(7.0, 60.0), (1.0, 5.0)])
    batch.learned("calls", 4.0, 30.0)
    batch.learned("absent", 0.0, 0.0)  # not in Redis: nothing to restore
    batch.add("spend", 0.5, 60)  # pending: never part of a known total
    assert sorted(batch.known()) == [("calls", 4.0, 30.0), ("short", 1.0, 5.0), ("spend", 7.0, 60.0)]
    clock.now += 10  # no flush meanwhile (Redis down): the expired are forgotten all the same
    assert sorted(batch.known()) == [("calls", 4.0, 20.0), ("spend", 7.0, 50.0)]
    assert sorted(batch._known) == ["calls", "spend"]
