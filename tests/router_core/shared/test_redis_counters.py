"""Batched counters (pure bookkeeping, clock injected): total = last flushed + pending, flush, restore, expiry."""

from __future__ import annotations

import pytest

from router_core.shared.redis_counters import CounterBatch


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_the_total_is_the_last_flushed_shared_total_plus_the_pending_adds() -> None:
    batch = CounterBatch(Clock())
    assert batch.add("spend", 1.5, 60) == 1.5
    assert batch.add("spend", 0.5, 60) == 2.0
    sent = batch.drain()
    assert {c: p.amount for c, p in sent.items()} == {"spend": 2.0} and batch.total("spend") == 0.0
    assert batch.add("spend", 1.0, 60) == 1.0  # added while the flush is out
    batch.flushed(sent, [(7.0, 59.0)])  # the shared total holds another replica's 5
    assert batch.total("spend") == 8.0  # 7 flushed + 1 pending
    assert batch.add("calls", 1, 60) == 1.0 and batch.flushes == 1


def test_one_flush_carries_every_counter_and_answers_in_order() -> None:
    batch = CounterBatch(Clock())
    batch.add("a", 1, 60)
    batch.add("b", 2, 60)
    batch.add("a", 3, 60)
    sent = batch.drain()
    assert [(c, p.amount) for c, p in sent.items()] == [("a", 4.0), ("b", 2.0)]
    batch.flushed(sent, [(4.0, 60.0), (12.0, 60.0)])
    assert (batch.total("a"), batch.total("b")) == (4.0, 12.0)
    assert batch.drain() == {}


def test_a_failed_flush_puts_its_adds_back() -> None:
    batch = CounterBatch(Clock())
    batch.add("spend", 2, 60)
    sent = batch.drain()
    batch.add("spend", 1, 60)
    batch.restore(sent)
    assert batch.total("spend") == 3.0
    assert {c: p.amount for c, p in batch.drain().items()} == {"spend": 3.0}


def test_a_read_updates_the_shared_total_and_expiry_zeroes_it() -> None:
    clock = Clock()
    batch = CounterBatch(clock)
    batch.learned("spend", 10.0, 5.0)
    batch.add("spend", 1.0, 60)
    assert batch.total("spend") == 11.0
    clock.now += 6  # the shared counter's TTL ran out (it runs from creation, so the pending add's does too)
    assert batch.total("spend") == 0.0
    batch.learned("gone", 3.0, 0.0)  # absent in Redis
    assert batch.total("gone") == 0.0


def test_expired_adds_are_not_restored() -> None:
    clock = Clock()
    batch = CounterBatch(clock)
    batch.add("w1", 1.0, 1.0)
    sent = batch.drain()
    clock.now += 2
    batch.restore(sent)
    assert batch.drain() == {}
    assert batch.add("w1", 1.0, 1.0) == pytest.approx(1.0)
