"""router_core.state.inflight: the gateway's own requests since the last scrape, seen by the pickers."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.state.inflight import InflightCounter
from router_core.state.quality import QualityTable
from schemas import InstanceSnapshot
from schemas.config import RouteLensConfig
from tests.router_core.conftest import NOW, features

EQUAL = [f"eq-{i}" for i in range(4)]


def _snap(iid: str, *, running: float = 2, queue: float = 0, at: float = 0.0, kv: float = 0.3) -> InstanceSnapshot:
    return InstanceSnapshot(instance=iid, model="m", scraped_at=NOW + timedelta(seconds=at), queue=queue,
                            running=running, kv_cache_usage=kv)


def test_open_attempts_are_added_to_the_queue() -> None:
    counter = InflightCounter()
    for _ in range(3):
        counter.begin("a")
    (adjusted,) = counter.adjust({"a": _snap("a", running=2, queue=1)}).values()
    assert (adjusted.running, adjusted.queue) == (2, 4)


def test_nothing_open_keeps_the_very_snapshot_and_counts_are_memoised() -> None:
    counter = InflightCounter()
    base = {"a": _snap("a"), "b": _snap("b")}
    assert counter.adjust(base)["a"] is base["a"]
    counter.begin("a")
    first, again = counter.adjust(base)["a"], counter.adjust(base)["a"]
    assert first is again and first.queue == 1  # same count, same object: the router's memo still hits
    assert counter.adjust(base)["b"] is base["b"]


def test_counts_that_go_up_and_down_keep_one_object_each_until_the_next_scrape() -> None:
    """Under concurrency the count moves with every request; each count keeps its one object."""
    counter = InflightCounter()
    base = {"a": _snap("a")}
    counter.adjust(base)
    tickets = [counter.begin("a") for _ in range(3)]
    three = counter.adjust(base)["a"]
    counter.end(tickets.pop())
    two = counter.adjust(base)["a"]
    tickets.append(counter.begin("a"))
    assert counter.adjust(base)["a"] is three and two.queue == 2 and three.queue == 3
    counter.end(tickets.pop())
    assert counter.adjust(base)["a"] is two
    scraped = {"a": _snap("a", at=1.0, queue=5)}  # a new scrape: its own objects
    counter.adjust(scraped)
    counter.begin("a")
    assert counter.adjust(scraped)["a"].queue == 6 and counter.adjust(scraped)["a"] is not two


def test_a_completed_attempt_is_no_longer_counted() -> None:
    counter = InflightCounter()
    counter.adjust({"a": _snap("a")})
    ticket = counter.begin("a")
    assert counter.count("a") == 1
    counter.end(ticket)
    assert counter.count("a") == 0
    counter.end(ticket)  # ending twice never goes below zero
    assert counter.count("a") == 0


def test_a_new_scrape_restarts_the_count_and_old_tickets_do_not_touch_it() -> None:
    counter = InflightCounter()
    counter.adjust({"a": _snap("a", at=0.0)})
    old = counter.begin("a")
    counter.begin("a")
    assert counter.count("a") == 2
    counter.adjust({"a": _snap("a", at=1.0)})  # the scrape now includes those two
    assert counter.count("a") == 0
    fresh = counter.begin("a")
    counter.end(old)  # sent before the scrape: already in its gauges
    assert counter.count("a") == 1
    counter.end(fresh)
    assert counter.count("a") == 0


def test_missing_gauges_stay_missing() -> None:
    counter = InflightCounter()
    blank = InstanceSnapshot(instance="a", model="m")
    counter.begin("a")
    assert counter.adjust({"a": blank})["a"] is blank


def _picks(with_counter: bool, preset: str) -> Counter[str]:
    """20 requests in one second over four equal instances, none completing within it.

    The second's one scrape caught ``eq-0`` a little less busy: enough for a ``max``
    picker that sees nothing but the scrape to send it the whole second.
    """
    cfg = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": iid, "model": "m", "url": f"http://127.0.0.1:{n + 1}"}
                                for n, iid in enumerate(EQUAL)]},
        "scoring": {"preset": preset}, "router": {"picker": "max"},
    })
    router = build_router(cfg, perf=lambda: 0.0)
    quality = QualityTable(cfg.models).snapshot()
    counter = InflightCounter()
    lead = {"kv": 0.29, "running": 1}  # a little ahead on the terms of both presets
    scraped = {iid: _snap(iid, **(lead if iid == "eq-0" else {}), at=-0.2) for iid in EQUAL}
    picks: Counter[str] = Counter()
    for n in range(20):
        now = NOW + timedelta(seconds=n * 0.05)  # injected clock: 20 requests/s
        ctx = DecisionContext(request_id=f"req-{n}", features=features(), intent="chat", now=now, quality=quality)
        state = counter.adjust(scraped) if with_counter else scraped
        chosen = router.decide(ctx, state).targets[0].id
        picks[chosen] += 1
        counter.begin(chosen)
    return picks


PRESETS = ["balanced", "seed-instance-score"]


@pytest.mark.parametrize("preset", PRESETS)
def test_no_herding_at_20_per_second_over_four_equal_instances(preset: str) -> None:
    picks = _picks(with_counter=True, preset=preset)
    assert sum(picks.values()) == 20
    assert max(picks.values()) <= 8, picks  # no instance takes more than 40% of the second's requests


@pytest.mark.parametrize("preset", PRESETS)
def test_without_the_counter_the_second_herds(preset: str) -> None:
    picks = _picks(with_counter=False, preset=preset)
    assert picks == {"eq-0": 20}  # what the issue saw: every request of the second on one instance
