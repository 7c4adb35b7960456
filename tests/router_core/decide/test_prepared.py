"""router_core.decide.prepared: state-only verdicts and terms memoised per snapshot object, several per instance."""

from __future__ import annotations

from typing import Any

from router_core.decide.decision import DecisionContext
from router_core.decide.prepared import PreparedCache
from router_core.framework import Candidate
from router_core.state.quality import QualityTable
from schemas.config import ScrapeSettings
from schemas.fleet import InstanceSnapshot, InstanceSpec
from tests.router_core.conftest import NOW, features, make_config, snap

SPEC = InstanceSpec(id="big-a", model="big", url="http://127.0.0.1:1")


class CountingFilter:
    """A state-only filter that counts how often it is asked."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def check(self, candidate: Candidate, ctx: Any) -> None:
        self.calls += 1


class QueueScorer:
    """A state-only scorer: fewer queued requests score higher."""

    name = "queue"

    def score(self, pool: list[Candidate], ctx: Any) -> list[float]:
        return [1.0 / (1.0 + (c.state.queue or 0)) for c in pool]


def _ctx() -> DecisionContext:
    return DecisionContext(request_id="r", features=features(), intent="chat", now=NOW,
                           quality=QualityTable(make_config().models).snapshot())


def _cache() -> tuple[PreparedCache, CountingFilter]:
    flt = CountingFilter()
    return PreparedCache([flt], [QueueScorer()], ScrapeSettings(), queue_norm=8.0), flt  # type: ignore[list-item]


def _with_queue(base: InstanceSnapshot, n: int) -> InstanceSnapshot:
    return base.model_copy(update={"queue": n})  # what InflightCounter.adjust hands the router


def test_alternating_snapshots_of_one_instance_are_each_prepared_once() -> None:
    cache, flt = _cache()
    base = snap("big-a")
    one, two = _with_queue(base, 1), _with_queue(base, 2)
    first = [cache.get(SPEC, s, 0.5, _ctx()) for s in (one, two)]
    again = [cache.get(SPEC, s, 0.5, _ctx()) for s in (one, two, one, two)]
    assert flt.calls == 2  # once per snapshot object, not once per request
    assert again == first * 2 and again[0] is first[0] and again[1] is first[1]
    assert (first[0].terms["queue"], first[1].terms["queue"]) == (0.5, 1 / 3)


def test_the_memo_is_bounded_and_stays_right_when_it_is_cleared() -> None:
    cache, flt = _cache()
    base = snap("big-a")
    many = [_with_queue(base, n) for n in range(100)]
    prepared = [cache.get(SPEC, s, 0.5, _ctx()) for s in many]
    assert flt.calls == 100
    assert [p.terms["queue"] for p in prepared] == [1.0 / (1 + n) for n in range(100)]
    assert cache.get(SPEC, many[-1], 0.5, _ctx()) is prepared[-1]  # kept after the last clearing
    assert cache.get(SPEC, many[0], 0.5, _ctx()).terms["queue"] == 1.0  # cleared long ago: prepared again
    assert flt.calls == 101


def test_suspect_state_is_never_memoised() -> None:
    cache, flt = _cache()
    old = snap("big-a", age=10.0)
    for _ in range(3):
        cache.get(SPEC, old, 10.0, _ctx())
    assert flt.calls == 3


def test_aged_copies_are_shared_per_snapshot_and_tenth() -> None:
    cache, _ = _cache()
    base = snap("big-a")
    one, two = _with_queue(base, 1), _with_queue(base, 2)
    seen = [cache.states_at([SPEC], {"big-a": s}, {"big-a": age})["big-a"] for s, age in
            ((one, 0.52), (two, 0.52), (one, 0.48), (two, 0.54), (one, 0.61))]
    assert seen[0] is seen[2] and seen[1] is seen[3]  # same snapshot, same tenth: one copy
    assert (seen[0].queue, seen[1].queue, seen[0].age_s, seen[4].age_s) == (1, 2, 0.5, 0.6)
    assert seen[4] is not seen[0]
