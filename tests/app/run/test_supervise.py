"""A child serve supervises is started again after a pause that grows while it keeps dying."""

from __future__ import annotations

import sys

from app.run.procs import Child
from app.run.supervise import Supervised, next_pause
from tests.polling import wait_until


def test_the_pause_doubles_while_the_child_keeps_dying_and_starts_over_after_a_steady_minute() -> None:
    pauses, pause = [], 0.0
    for lived in (0.5, 3.0, 10.0, 1.0, 1.0, 1.0, 59.0, 61.0, 2.0):
        pause = next_pause(pause, lived)
        pauses.append(pause)
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 1.0, 2.0]


def test_a_dead_child_is_started_again_and_a_stopped_one_is_not() -> None:
    started: list[Child] = []

    def start() -> Child:
        child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], {}, None)
        started.append(child)
        return child

    sup = Supervised("sleeper", start)
    try:
        started[0].proc.kill()  # dies: started again after 1 s
        assert wait_until(lambda: len(started) == 2, 10, 0.05)
        assert sup.child is started[1] and sup.restarts == 1 and started[1].alive()
    finally:
        sup.stop()
    assert not sup.watching  # the watch has ended: nothing is started again
    assert len(started) == 2 and all(c.proc.poll() is not None for c in started)


def test_a_child_that_cannot_be_started_is_tried_again_at_the_next_pause() -> None:
    started: list[Child] = []
    refusals = [OSError(24, "Too many open files")]

    def start() -> Child:
        if started and refusals:
            raise refusals.pop()
        child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], {}, None)
        started.append(child)
        return child

    sup = Supervised("sleeper", start)
    try:
        started[0].proc.kill()  # dies; the first start again fails, the next one (2 s later) works
        assert wait_until(lambda: len(started) == 2, 15, 0.05)
        assert not refusals and sup.child is started[1] and started[1].alive()
    finally:
        sup.stop()


def test_a_child_started_by_the_caller_is_watched_and_started_again_by_start() -> None:
    # the caller starts the first child itself (to give up when it does not come up), then hands it over
    first = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], {}, None)
    started: list[Child] = []

    def start() -> Child:
        child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], {}, None)
        started.append(child)
        return child

    sup = Supervised("sleeper", start, child=first)
    try:
        assert sup.child is first and not started  # not started twice
        first.proc.kill()
        assert wait_until(lambda: len(started) == 1, 10, 0.05)
        assert sup.child is started[0] and sup.restarts == 1
    finally:
        sup.stop()
    assert all(c.proc.poll() is not None for c in (first, *started))


def test_a_child_that_refuses_its_configuration_before_it_is_ready_is_not_started_again() -> None:
    """serve started the store again after it refused an unset api_key_env variable: the same refusal, then
    'the store process did not start' (the telemetry audit). A child that was ready and then exits 2 is restarted."""
    started: list[Child] = []

    def start(code: str) -> Child:
        child = Child("refuser", [sys.executable, "-c", code], {}, "ready")
        started.append(child)
        return child

    refusing = Supervised("refuser", lambda: start("raise SystemExit(2)"))
    assert wait_until(lambda: not refusing.watching, 10, 0.05)  # the watch ended without a second start
    assert len(started) == 1 and refusing.restarts == 0
    refusing.stop()
    started.clear()
    ready_then_2 = "print('ready', flush=True); import time; time.sleep(0.3); raise SystemExit(2)"
    later = Supervised("refuser", lambda: start(ready_then_2))
    try:
        assert wait_until(lambda: len(started) == 2, 10, 0.05)
    finally:
        later.stop()
