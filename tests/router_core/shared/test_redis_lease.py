"""Bucket leases (pure bookkeeping, clock injected): held tokens, refills, credit, refusals, the bound."""

from __future__ import annotations

import random

import pytest

from router_core.shared.redis_lease import BucketLeases, Refill, lease_size


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Bucket:
    """The grant script of :mod:`router_core.shared.redis_scripts`, in Python: the shared bucket."""

    def __init__(self, clock: Clock, rate: float, burst: float) -> None:
        self.clock, self.rate, self.burst = clock, rate, burst
        self.tokens, self.at = burst, clock.now

    def level(self) -> float:
        """Tokens now (refilled since the last grant)."""
        return min(self.burst, self.tokens + (self.clock.now - self.at) * self.rate)

    def grant(self, row: Refill) -> tuple[int, float, float]:
        self.tokens, self.at = self.level(), self.clock.now
        self.tokens = min(self.burst, self.tokens - row.debt)
        granted = max(0, min(row.want, int(self.tokens - row.lease.floor + 1e-9)))
        self.tokens -= granted
        wait = (1 + row.lease.floor - self.tokens) / self.rate if self.tokens - row.lease.floor < 1 else 0.0
        return granted, wait, self.tokens


def refill(leases: BucketLeases, bucket: Bucket) -> None:
    for row in leases.requests():
        leases.granted(row, *bucket.grant(row))


def test_lease_size_is_a_slice_of_the_rate_within_a_share_of_the_burst() -> None:
    assert lease_size(200, 400, 2, 0.1) == 20  # 100 ms of the rate
    assert lease_size(5000, 400, 2, 0.1) == 100  # at most burst / (2 * replicas)
    assert lease_size(0.01, 4, 2, 0.1) == 1  # at least one
    assert lease_size(100, 1, 4, 0.1) == 1


def test_takes_come_from_the_held_tokens_and_a_refill_is_due_at_half() -> None:
    clock = Clock()
    leases, bucket = BucketLeases(clock), Bucket(clock, 100, 100)
    assert leases.take("b", 100, 100, 0.0, 1) == (True, 0.0)  # cold: on credit
    assert leases.due
    [row] = leases.requests()
    assert (row.debt, row.want) == (1, 10)  # the credit is charged, a full lease (100 ms of 100/s) taken
    leases.granted(row, *bucket.grant(row))
    assert bucket.tokens == pytest.approx(89) and not leases.due
    for _ in range(4):
        assert leases.take("b", 100, 100, 0.0, 1) == (True, 0.0)
    assert not leases.due  # 6 of 10 held
    assert leases.take("b", 100, 100, 0.0, 1) == (True, 0.0)
    assert leases.due  # 5 held: half
    [row] = leases.requests()
    assert (row.debt, row.want) == (0, 5)
    leases.granted(row, *bucket.grant(row))
    assert leases.leases[("b", 0.0)].held == 10 and leases.credited == 1


def test_credit_is_bounded_by_the_lease_size_then_takes_wait_for_the_refill() -> None:
    clock = Clock()
    leases, bucket = BucketLeases(clock), Bucket(clock, 30, 30)  # lease size 3
    assert [leases.take("b", 30, 30, 0.0, 1) for _ in range(3)] == [(True, 0.0)] * 3
    assert leases.take("b", 30, 30, 0.0, 1) is None  # credit used up and no refill back: wait for it
    [row] = leases.requests()
    assert (row.debt, row.want) == (3, 4)  # the three on credit, and the one that came short on top of a lease
    leases.granted(row, *bucket.grant(row))
    assert bucket.tokens == pytest.approx(23)
    assert leases.take("b", 30, 30, 0.0, 1) == (True, 0.0)  # the retry


def test_an_empty_shared_bucket_refuses_locally_until_it_has_a_token() -> None:
    clock = Clock()
    leases, bucket = BucketLeases(clock), Bucket(clock, 0.5, 2)  # lease size 1
    assert leases.take("b", 0.5, 2, 0.0, 1) == (True, 0.0)
    refill(leases, bucket)  # charges 1, takes 1: the bucket is empty
    assert leases.take("b", 0.5, 2, 0.0, 1) == (True, 0.0)
    refill(leases, bucket)  # nothing granted: empty for 2 s
    taken, wait = leases.take("b", 0.5, 2, 0.0, 1)
    assert not taken and wait == pytest.approx(2.0)
    assert not leases.due  # no refill asked for while refused
    clock.now += 1.0
    assert leases.take("b", 0.5, 2, 0.0, 1) == (False, pytest.approx(1.0))
    clock.now += 1.0
    assert leases.take("b", 0.5, 2, 0.0, 1) == (True, 0.0)  # a token is due by now: credit again
    refill(leases, bucket)
    assert bucket.tokens == pytest.approx(0.0)


def test_a_priority_floor_is_a_lease_of_its_own() -> None:
    clock = Clock()
    leases, bucket = BucketLeases(clock), Bucket(clock, 1e-3, 10)  # lease size 1
    assert leases.take("shed", 1e-3, 10, 3.0, 1) == (True, 0.0)
    assert leases.take("shed", 1e-3, 10, 0.0, 1) == (True, 0.0)
    rows = leases.requests()
    assert {r.lease.floor for r in rows} == {0.0, 3.0}
    bucket.tokens = 4.0  # above the low floor by one
    for row in rows:
        leases.granted(row, *bucket.grant(row))
    low, high = leases.leases[("shed", 3.0)], leases.leases[("shed", 0.0)]
    assert low.held + high.held == 1 and bucket.tokens == pytest.approx(1.0)


def test_idle_leases_give_their_tokens_back_and_pay_their_debt() -> None:
    clock = Clock()
    leases, bucket = BucketLeases(clock, idle_s=2.0), Bucket(clock, 1e-6, 100)  # lease size 1
    leases.take("b", 1e-6, 100, 0.0, 1)
    refill(leases, bucket)  # charged 1, holds 1
    assert bucket.tokens == pytest.approx(98)
    clock.now += 1.0
    assert leases.sweep() == []
    clock.now += 1.5
    [row] = leases.sweep()
    assert (row.debt, row.want) == (-1, 0)
    bucket.grant(row)
    assert bucket.tokens == pytest.approx(99) and not leases.leases  # one admitted, one given back


def test_a_failed_refill_keeps_its_credit_for_the_next_one() -> None:
    leases = BucketLeases(Clock())
    assert leases.take("b", 10, 10, 0.0, 1) == (True, 0.0)  # lease size 1: on credit
    [row] = leases.requests()
    leases.failed(row)
    assert leases.take("b", 10, 10, 0.0, 1) is None  # the credit is still owed: no more of it
    [row] = leases.requests()
    assert (row.debt, row.want) == (1, 2)


def test_release_gives_every_lease_back_at_shutdown() -> None:
    clock = Clock()
    leases, bucket = BucketLeases(clock), Bucket(clock, 1e-6, 100)
    leases.take("a", 1e-6, 100, 0.0, 1)
    leases.take("b", 1e-6, 100, 0.0, 1)
    refill(leases, bucket)  # each: charged 1, holds 1
    leases.take("b", 1e-6, 100, 0.0, 1)  # uses its held token
    rows = leases.release()
    assert sorted((r.lease.bucket, r.debt) for r in rows) == [("a", -1)] and not leases.leases


@pytest.mark.parametrize("seed", range(8))
def test_replicas_together_overdraw_the_shared_bucket_by_at_most_lease_size_times_replicas(seed: int) -> None:
    """Random interleavings of takes, refills and time on N replicas of one bucket (seeded)."""
    rng = random.Random(seed)
    clock = Clock()
    replicas, rate, burst = rng.choice([2, 3, 4]), rng.choice([5.0, 50.0, 500.0]), rng.choice([10.0, 40.0, 400.0])
    bucket = Bucket(clock, rate, burst)
    leases = [BucketLeases(clock, lease_s=0.1, idle_s=0.5) for _ in range(replicas)]
    size = lease_size(rate, burst, replicas, 0.1)
    in_flight: list[tuple[BucketLeases, list[Refill]]] = []
    admitted, start = 0, clock.now
    for _ in range(3000):
        r = rng.random()
        if r < 0.7:
            mine = rng.choice(leases)
            got = mine.take("b", rate, burst, 0.0, replicas)
            admitted += bool(got and got[0])
        elif r < 0.85:
            mine = rng.choice(leases)
            if rows := mine.requests():
                in_flight.append((mine, rows))
        elif r < 0.95 and in_flight:  # a refill answers (any order: replicas race)
            mine, rows = in_flight.pop(rng.randrange(len(in_flight)))
            for row in rows:
                mine.granted(row, *bucket.grant(row))
        else:
            clock.now += rng.expovariate(10.0)
            for mine in leases:
                for row in mine.sweep():
                    bucket.grant(row)
        owed = sum(lease.debt + lease.sending for mine in leases for lease in mine.leases.values())
        assert bucket.level() - owed >= -size * replicas - 1e-9  # charged or not yet, credit is at most that
        assert admitted <= burst + rate * (clock.now - start) + size * replicas + 1e-9
    assert admitted > 0


def test_a_lease_shows_the_shared_tokens_its_last_refill_left_plus_those_it_holds() -> None:
    clock = Clock()
    leases, bucket = BucketLeases(clock), Bucket(clock, 100, 100)
    assert leases.tokens("b") is None  # nothing asked of Redis yet
    leases.take("b", 100, 100, 0.0, 1)
    refill(leases, bucket)  # charged 1, took 10: Redis has 89, the lease 10
    assert leases.tokens("b") == pytest.approx(99)
    leases.take("b", 100, 100, 0.0, 1)
    assert leases.tokens("b") == pytest.approx(98)
