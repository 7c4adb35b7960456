"""A stored snapshot's ``seen_at`` is when its state was observed, not when its instance was last scraped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from bench.synthetic import TraceFactory
from ingest.codec.encoder import Encoder
from ingest.kinds import Kind
from schemas.fleet import InstanceSnapshot, LatchState

SCRAPED = datetime(2026, 11, 29, 15, 0, 0, 250_000, tzinfo=UTC)  # the last good scrape
CLOCK = datetime(2026, 11, 29, 16, 0, tzinfo=UTC)


def seen_at(payloads: list[tuple[Kind, bytes]]) -> list[datetime]:
    return [datetime.fromisoformat(orjson.loads(p)["seen_at"]) for k, p in payloads if k is Kind.SNAPSHOT]


def test_each_round_of_an_unreachable_instance_is_seen_at_its_own_time() -> None:
    enc = Encoder(clock=lambda: CLOCK)
    rounds = [InstanceSnapshot(instance="a", model="m", scraped_at=SCRAPED, age_s=age, stale=age > 3,
                               latches=[LatchState(constraint="kv-cache", out=age > 4, value=0.5 + age / 10)])
              for age in (1.004, 2.003, 3.004, 4.006, 5.002)]
    got = [t for snap in rounds for t in seen_at(enc.encode(snap))]
    # The old encoder wrote the scrape's time on every one of them: five rows, one time.
    assert got == [SCRAPED + timedelta(seconds=s.age_s or 0) for s in rounds]


def test_without_an_age_the_scrape_and_never_scraped_the_clock() -> None:
    enc = Encoder(clock=lambda: CLOCK)
    assert seen_at(enc.encode(InstanceSnapshot(instance="a", model="m", scraped_at=SCRAPED))) == [SCRAPED]
    assert seen_at(enc.encode(InstanceSnapshot(instance="b", model="m"))) == [CLOCK]


def test_a_candidates_state_is_seen_at_its_decision() -> None:
    enc = Encoder(clock=lambda: CLOCK)
    trace = TraceFactory(seed=3, n_candidates=2, start=SCRAPED + timedelta(seconds=7)).trace()
    # A round's snapshot of the same instance just before: the decision's own row still gets its own time.
    enc.encode(InstanceSnapshot(instance="x", model="m", scraped_at=SCRAPED, age_s=6.5))
    assert seen_at(enc.encode(trace)) == [trace.ts, trace.ts]
