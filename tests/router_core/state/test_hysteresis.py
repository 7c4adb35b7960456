import pytest

from router_core.state.hysteresis import HysteresisLatch


def test_flapping_around_the_threshold_never_trips_the_latch() -> None:
    # 84% <-> 86% every 0.5 s against "leave above 85% after 2 s": the breach never lasts 2 s.
    latch, changes = HysteresisLatch(exit_for=2.0, enter_for=5.0), 0
    for i in range(200):
        value = 0.86 if i % 2 else 0.84
        changes += latch.update(i * 0.5, broken=value > 0.85, recovered=value <= 0.80)
    assert changes == 0 and not latch.out


def test_a_sustained_breach_trips_after_exit_for_and_recovery_needs_enter_for_below_the_lower_bound() -> None:
    latch = HysteresisLatch(exit_for=2.0, enter_for=5.0)
    t = 0.0
    for t in (0.0, 1.0, 1.9):
        assert not latch.update(t, broken=True, recovered=False)
    assert latch.update(2.0, broken=True, recovered=False) and latch.out and latch.changed_at == 2.0
    # 82%: below the exit threshold but above the 80% re-entry bound: stays out however long.
    for t in range(3, 30):
        assert not latch.update(float(t), broken=False, recovered=False)
    assert latch.out
    # 78% for 5 s brings it back; an interruption restarts the count.
    latch.update(30.0, broken=False, recovered=True)
    latch.update(33.0, broken=False, recovered=False)  # a blip above 80%
    assert not latch.update(37.0, broken=False, recovered=True)
    assert latch.out
    assert latch.update(42.0, broken=False, recovered=True) and not latch.out


@pytest.mark.parametrize("period", [0.25, 0.5, 1.0, 1.5])
def test_state_changes_at_most_once_per_dwell_window(period: float) -> None:
    latch = HysteresisLatch(exit_for=2.0, enter_for=5.0)
    flips: list[float] = []
    for i in range(400):
        t = i * 0.1
        high = int(t / period) % 2 == 1
        value = 0.86 if high else 0.79
        if latch.update(t, broken=value > 0.85, recovered=value <= 0.80):
            flips.append(t)
    gaps = [b - a for a, b in zip(flips, flips[1:], strict=False)]
    assert all(g >= 2.0 for g in gaps)
