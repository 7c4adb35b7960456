"""A candidate's recorded state carries its age at the decision, not at the scrape round."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.router_core.conftest import NOW, decide, healthy, snap


def test_the_candidate_state_is_aged_to_the_decision() -> None:
    stamped = {iid: s.model_copy(update={"age_s": 0.0}) for iid, s in healthy().items()}  # as the tick left them
    _, trace = decide(stamped, now=NOW + timedelta(seconds=3.66))
    ages = {c.instance: c.state.age_s for c in trace.candidates if c.state is not None}
    assert ages == {"big-a": pytest.approx(4.2), "big-b": pytest.approx(4.2), "small-a": pytest.approx(4.2)}
    assert all(c.state is not None and c.state.stale for c in trace.candidates)  # beyond suspect_after_s (3 s)


def test_a_state_stamped_within_a_tenth_stays_the_very_object() -> None:
    fresh = snap("big-b", kv=0.2, age=0.5).model_copy(update={"age_s": 0.47})
    state = healthy() | {"big-b": fresh}
    _, trace = decide(state)
    (b,) = [c for c in trace.candidates if c.instance == "big-b"]
    assert b.state == fresh and b.state.age_s == 0.47
    never = healthy() | {"big-b": snap("big-b", age=None)}
    _, trace = decide(never)
    (b,) = [c for c in trace.candidates if c.instance == "big-b"]
    assert b.state is not None and b.state.age_s is None
