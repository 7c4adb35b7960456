"""BreakerBoard: what opens each scope, half-open trials, recovery, operators and replicas (clock advanced by hand)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from router_core.resilience.breaker import BreakerState
from router_core.resilience.breakers import AttemptOutcome, BreakerBoard
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.resilience import BreakerSettings
from schemas.fleet import InstanceSpec
from schemas.probe import ProbeStatus


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def fleet(zones: tuple[str, ...] = ("local",)) -> list[InstanceSpec]:
    return [InstanceSpec(id=f"i{n}", model="m" if n < 2 else "n", url=f"http://h{n}", zone=zones[n % len(zones)])
            for n in range(4)]


def board(clock: Clock, zones: tuple[str, ...] = ("local",),
          **settings: Any) -> tuple[BreakerBoard, list[InstanceSpec]]:
    specs = fleet(zones)
    return BreakerBoard(BreakerSettings.model_validate(settings), specs, clock=clock), specs


def attempt(b: BreakerBoard, spec: InstanceSpec, outcome: AttemptOutcome) -> bool:
    adm = b.admit(spec)
    if adm is None:
        return False
    b.done(adm, outcome)
    return True


CASES = [
    # (outcomes on i0, state of i0's breaker after)
    (["timeout", "timeout", "timeout"], BreakerState.OPEN),
    (["connect", "timeout", "connect"], BreakerState.OPEN),
    (["timeout", "timeout", "ok", "timeout"], BreakerState.CLOSED),
    (["timeout", "timeout", "http_5xx"], BreakerState.CLOSED),  # an answer: the instance is reachable
    (["http_5xx"] * 5, BreakerState.CLOSED),
    (["aborted"] * 5, BreakerState.CLOSED),
]


@pytest.mark.parametrize(("outcomes", "state"), CASES, ids=[",".join(c[0]) for c in CASES])
def test_consecutive_timeouts_or_connect_errors_open_the_instance(outcomes: list[AttemptOutcome],
                                                                  state: BreakerState) -> None:
    b, specs = board(Clock(), model={"enabled": False})
    for o in outcomes:
        attempt(b, specs[0], o)
    assert b.get("instance", "i0").state is state  # type: ignore[union-attr]
    assert (b.blocking(specs[0]) is not None) is (state is BreakerState.OPEN)
    assert b.blocking(specs[1]) is None


def test_half_open_trials_then_close_after_consecutive_passes() -> None:
    clock = Clock()
    b, specs = board(clock, instance={"open_s": 2, "trial_requests": 1, "close_after": 2})
    for _ in range(3):
        attempt(b, specs[0], "timeout")
    assert b.admit(specs[0]) is None
    clock.t += 2
    b.sweep()
    assert b.get("instance", "i0").state is BreakerState.HALF_OPEN  # type: ignore[union-attr]
    trial = b.admit(specs[0])
    assert trial is not None and b.admit(specs[0]) is None  # one trial at a time
    assert b.blocking(specs[0]) is not None  # the filter sees the slot taken
    b.done(trial, "ok")
    assert attempt(b, specs[0], "ok")
    assert b.get("instance", "i0").state is BreakerState.CLOSED  # type: ignore[union-attr]
    moves = [(t.from_state, t.to_state) for t in b.take_transitions()]
    assert moves == [(BreakerState.CLOSED, BreakerState.OPEN), (BreakerState.OPEN, BreakerState.HALF_OPEN),
                     (BreakerState.HALF_OPEN, BreakerState.CLOSED)]


def test_a_failed_trial_reopens() -> None:
    clock = Clock()
    b, specs = board(clock, instance={"open_s": 1})
    for _ in range(3):
        attempt(b, specs[0], "connect")
    clock.t += 1
    b.sweep()
    attempt(b, specs[0], "connect")
    br = b.get("instance", "i0")
    assert br is not None and br.state is BreakerState.OPEN and "trial failed" in br.reason


def test_a_stall_opens_before_any_timeout_and_aborts_the_outstanding_attempts() -> None:
    clock = Clock()
    b, specs = board(clock, instance={"stall_after_s": 0.5, "stall_min_outstanding": 3})
    aborted: list[int] = []
    for n in range(3):
        assert b.admit(specs[0], lambda n=n: aborted.append(n)) is not None  # type: ignore[misc]
    clock.t += 0.4
    b.sweep()
    assert b.blocking(specs[0]) is None
    clock.t += 0.2
    b.sweep()
    br = b.blocking(specs[0])
    assert br is not None and "3 attempts outstanding" in br.reason and aborted == [0, 1, 2]


MODEL_CASES = [
    # (5xx share of i0's attempts, seconds held, opened)
    (0.5, 0.0, False),  # above, but not held for_s yet
    (0.5, 6.0, True),
    (0.1, 6.0, False),  # below the threshold
]


@pytest.mark.parametrize(("share", "held", "opened"), MODEL_CASES, ids=lambda v: str(v))
def test_a_model_opens_when_its_5xx_share_stays_above_the_threshold(share: float, held: float,
                                                                    opened: bool) -> None:
    clock = Clock()
    b, specs = board(clock, model={"threshold": 0.15, "for_s": 5, "window_s": 10, "min_requests": 10})
    for n in range(20):
        attempt(b, specs[n % 2], "http_5xx" if n < 20 * share else "ok")
    clock.t += held
    attempt(b, specs[0], "http_5xx")
    b.sweep()
    blocked = b.blocking(specs[0])
    assert (blocked is not None and blocked.scope == "model") is opened
    assert b.blocking(specs[2]) is None  # model n is untouched


def test_errors_that_left_the_window_no_longer_count() -> None:
    clock = Clock()
    b, specs = board(clock, model={"threshold": 0.15, "for_s": 0, "window_s": 10, "min_requests": 10})
    for _ in range(9):  # too few to judge a share on
        attempt(b, specs[0], "http_5xx")
    clock.t += 10.5
    for _ in range(30):
        attempt(b, specs[0], "ok")
    attempt(b, specs[0], "http_5xx")  # 1 of 31 in the window (with the 9 gone: 10 of 40, above 15%)
    assert b.blocking(specs[0]) is None
    for _ in range(5):
        attempt(b, specs[0], "http_5xx")  # 6 of 36: above
    blocked = b.blocking(specs[0])
    assert blocked is not None and "error share 17% of 36 attempts" in blocked.reason


def test_a_closed_model_breaker_counts_its_error_share_afresh() -> None:
    clock = Clock()
    b, specs = board(clock, model={"threshold": 0.15, "for_s": 0, "window_s": 10, "min_requests": 10})
    for _ in range(20):
        attempt(b, specs[0], "http_5xx")
    opened = b.blocking(specs[0])
    assert opened is not None and opened.scope == "model"
    b.close("model", "m")  # the errors that opened it are forgotten with it
    for _ in range(30):
        attempt(b, specs[0], "ok")
    attempt(b, specs[0], "http_5xx")  # 1 of 31 (with the 20 before: 21 of 51)
    assert b.blocking(specs[0]) is None


def test_a_zone_opens_only_when_there_is_another_zone() -> None:
    clock = Clock()
    settings = {"zone": {"threshold": 0.05, "for_s": 0, "min_requests": 5}, "model": {"enabled": False},
                "instance": {"consecutive_failures": 100}}
    one, specs = board(clock, **settings)
    two, specs2 = board(clock, zones=("a", "b"), **settings)
    for _ in range(10):
        attempt(one, specs[0], "timeout")
        attempt(two, specs2[0], "timeout")
    assert one.blocking(specs[0]) is None
    z = two.blocking(specs2[2])  # i2 is in zone a with i0
    assert z is not None and z.scope == "zone" and z.name == "a" and two.blocking(specs2[1]) is None


def test_operator_close_and_replica_messages() -> None:
    clock = Clock()
    b, specs = board(clock)
    for _ in range(3):
        attempt(b, specs[0], "timeout")
    t = b.take_transitions()[0]
    other, _ = board(clock)
    assert other.apply(t.to_message("replica-1"))
    assert other.blocking(specs[0]) is not None
    assert other.take_transitions()[0].remote
    assert b.close("instance", "i0") is not None and b.blocking(specs[0]) is None
    assert b.close("instance", "nope") is None
    assert not other.apply({"scope": "instance", "name": "i0", "to": "sideways"})
    assert b.take_transitions()[0].reason == "closed by an operator"


def verdict(ok: bool, flaps: int = 1) -> ProbeStatus:
    """A new probe verdict as the prober publishes it (``flaps`` > 0: the probes moved it there)."""
    return ProbeStatus(kind=ProbeKind.SYNTAX, verdict=ProbeVerdict.OK if ok else ProbeVerdict.FAILED,
                       since=datetime(2026, 1, 1, tzinfo=UTC), flaps=flaps)


def test_consecutive_probe_passes_close_the_instance_and_model_breakers() -> None:
    spec = InstanceSpec(id="a", model="m", url="http://127.0.0.1:1")
    other = InstanceSpec(id="b", model="m", url="http://127.0.0.1:2", zone="z2")
    board = BreakerBoard(BreakerSettings(), [spec, other], clock=lambda: 0.0)
    for scope, name in (("instance", "a"), ("model", "m")):
        b = board.get(scope, name)
        assert b is not None
        board._open(b, "test", 0.0)
    need = board.get("model", "m").close_after  # type: ignore[union-attr]
    for _ in range(need - 1):
        board.probe_verdict(spec, verdict(True))
    assert board.get("model", "m").state is not BreakerState.CLOSED  # type: ignore[union-attr]
    board.probe_verdict(spec, verdict(False))  # a failing verdict starts the count again
    closed = [board.probe_verdict(spec, verdict(True)) for _ in range(need)]
    assert [b.scope for b in closed[-1]] == ["model"]
    assert board.get("instance", "a").state is BreakerState.CLOSED  # closed earlier, after its own close_after passes
    assert board.get("model", "m").state is BreakerState.CLOSED  # type: ignore[union-attr]


def test_first_verdicts_are_no_probe_passes() -> None:
    """An instance's first verdict is ok until enough probes failed: a crashed instance's first probes give it."""
    clock = Clock()
    b, specs = board(clock)
    for _ in range(3):
        attempt(b, specs[0], "connect")
    assert b.get("instance", "i0").state is BreakerState.OPEN  # type: ignore[union-attr]
    for _ in range(5):
        assert b.probe_verdict(specs[0], verdict(True, flaps=0)) == []
    assert b.get("instance", "i0").state is BreakerState.OPEN  # type: ignore[union-attr]
    assert b.admit(specs[0]) is None


@pytest.mark.parametrize("remote", [False, True], ids=["local", "from-replica"])
def test_probe_passes_before_an_opening_do_not_count_toward_closing_it(remote: bool) -> None:
    clock = Clock()
    b, specs = board(clock)
    close_after = b.get("instance", "i0").close_after  # type: ignore[union-attr]
    for _ in range(close_after - 1):  # the instance recovered from an earlier fault: passes in a row, nothing open
        b.probe_verdict(specs[0], verdict(True))
    if remote:
        assert b.apply({"origin": "r2", "scope": "instance", "name": "i0", "to": "open", "reason": "3 connect"})
    else:
        for _ in range(3):
            attempt(b, specs[0], "connect")
    assert b.get("instance", "i0").state is BreakerState.OPEN  # type: ignore[union-attr]
    assert b.probe_verdict(specs[0], verdict(True)) == []  # one pass since it opened, not close_after
    for _ in range(close_after - 1):
        b.probe_verdict(specs[0], verdict(True))
    assert b.get("instance", "i0").state is BreakerState.CLOSED  # type: ignore[union-attr]


def test_a_model_opening_resets_the_probe_passes_of_its_instances() -> None:
    clock = Clock()
    b, specs = board(clock, model={"close_after": 2})
    b.probe_verdict(specs[1], verdict(True))
    model = b.get("model", "m")
    assert model is not None
    b._open(model, "5xx share", clock())
    assert b.probe_verdict(specs[1], verdict(True)) == []
    assert [x.scope for x in b.probe_verdict(specs[1], verdict(True))] == ["model"]
