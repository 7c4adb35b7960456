from collections.abc import Mapping
from typing import Any

import pytest

from router_core.decide.builtin import build_router
from router_core.decide.decision import Decision, DecisionContext
from router_core.resilience.router_modes import ModeChoice, RouterModes, static_order
from router_core.state.quality import QualityTable
from schemas import RoutingMode
from schemas.config.economics import RouterModeSettings
from schemas.fleet import InstanceSnapshot
from schemas.records import RouterEvent
from tests.router_core.conftest import NOW, features, healthy, make_config


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.step = 0.0

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def _decide(router: Any, modes: RouterModes, state: Mapping[str, InstanceSnapshot]) -> Decision:
    f = features()
    ctx = DecisionContext(request_id="r1", features=f, intent="chat", now=NOW, quality=QualityTable({}).snapshot(),
                          mode=modes.choice())
    decision: Decision = router.decide(ctx, state)
    modes.observe_decision(decision.decision_ms)
    return decision


def test_slow_decisions_switch_to_static_mode_and_fast_ones_back() -> None:
    perf, events = Clock(), []
    router = build_router(make_config(), perf=perf)
    modes = RouterModes(RouterModeSettings(), on_event=events.append)
    perf.step = 0.02  # every perf reading 20 ms later: a decision takes far more than 50 ms
    for n in range(5):
        assert modes.mode is RoutingMode.NORMAL, n
        assert _decide(router, modes, healthy()).decision_ms > 50
    assert modes.mode is RoutingMode.STATIC and len(events) == 1 and events[0].kind == "router_mode"
    perf.step = 1e-6  # fast again
    picks = []
    for _ in range(3):
        d = _decide(router, modes, healthy())
        assert d.mode is RoutingMode.STATIC and "static mode" in (d.fallback_reason or "")
        assert not d.weights  # no scoring in static mode
        picks.append(d.targets[0].id)
    assert len(set(picks)) == 3  # round robin over the three feasible instances
    assert modes.mode is RoutingMode.NORMAL and len(events) == 2
    assert _decide(router, modes, healthy()).mode is RoutingMode.NORMAL


def test_a_slow_streak_broken_by_a_fast_decision_does_not_switch() -> None:
    modes = RouterModes(RouterModeSettings())
    for ms in (60, 60, 60, 60, 10, 60, 60, 60, 60):
        modes.observe_decision(ms)
    assert modes.mode is RoutingMode.NORMAL


@pytest.mark.parametrize(("weights", "expected"), [
    ([1, 1, 1], ["a", "b", "c", "a", "b", "c"]),
    ([3, 1], ["a", "b", "a", "a", "a", "b"]),
])
def test_static_order_is_weighted_round_robin(weights: list[int], expected: list[str]) -> None:
    ids = ["a", "b", "c"][: len(weights)]
    assert [static_order(ids, weights, seq)[0] for seq in range(len(expected))] == expected


def _feedback(modes: RouterModes, clock: Clock, seconds: float, wrong_share: float, every: float = 1.0) -> None:
    for i in range(int(seconds / every)):
        clock.t += every
        modes.observe_feedback(correct=(i % 100) >= wrong_share * 100)


def test_misroutes_above_30_percent_for_a_minute_switch_to_safe_mode_and_back() -> None:
    clock, events = Clock(), []
    s = RouterModeSettings(safe_model="small")
    modes = RouterModes(s, clock=clock, on_event=events.append)
    _feedback(modes, clock, 30, 0.5)
    assert modes.mode is RoutingMode.NORMAL  # above 30%, but not yet for a minute
    _feedback(modes, clock, 100, 0.5)
    assert modes.mode is RoutingMode.SAFE and events[-1].model == "small"
    router = build_router(make_config())
    d = _decide(router, modes, healthy())
    assert d.mode is RoutingMode.SAFE and {t.model for t in d.targets} == {"small"} and d.rule == "safe:small"
    _feedback(modes, clock, 200, 0.0)  # correct from now on: the share falls below 5% within the window
    assert modes.mode is RoutingMode.SAFE  # ... but not yet for five minutes
    _feedback(modes, clock, 200, 0.0)
    assert modes.mode is RoutingMode.NORMAL and len(events) == 2
    assert all(isinstance(e, RouterEvent) for e in events)


def test_without_a_safe_model_there_is_no_safe_mode() -> None:
    clock = Clock()
    modes = RouterModes(RouterModeSettings(), clock=clock)
    _feedback(modes, clock, 300, 1.0)
    assert modes.mode is RoutingMode.NORMAL and modes.state()["misroute_rate"] == 1.0


def test_safe_mode_leaves_named_model_requests_alone() -> None:
    router = build_router(make_config())
    ctx = DecisionContext(request_id="r", features=features("big"), intent=None, now=NOW,
                          quality=QualityTable({}).snapshot(), mode=ModeChoice(RoutingMode.SAFE, safe_model="small"))
    d = router.decide(ctx, healthy())
    assert d.mode is RoutingMode.NORMAL and {t.model for t in d.targets} == {"big"}


def test_peek_shows_the_next_static_turn_without_taking_it() -> None:
    modes = RouterModes(RouterModeSettings())
    assert modes.peek() is None and modes.choice() is None
    modes.is_static = True
    seen = modes.peek()
    assert seen is not None and seen.mode is RoutingMode.STATIC and seen.seq == 1 and modes.seq == 0
    assert modes.peek() == seen and modes.choice() == seen and modes.seq == 1
    assert (modes.peek() or seen).seq == 2
