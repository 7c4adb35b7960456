"""The waterfall counts a rule's levels as the router filtered them: its target first, the chain's next after."""

from __future__ import annotations

from app.ui.data.waterfall import waterfall_stages
from tests.router_core.conftest import decide, healthy, snap
from tests.router_core.decide.test_router_rules import CONFIG, out, route


def test_an_empty_target_then_the_chain_s_next_model_are_two_passes_of_the_filters() -> None:
    # rule to-small: small-a (latched out on kv-cache), then its chain's big-a and big-b
    state = healthy() | {"small-a": snap("small-a", kv=0.95, latches=[out("small-a")])}
    _, trace = decide(state, CONFIG, route=route(tokens=2000))
    frame = waterfall_stages(trace).set_index("stage")

    assert frame.loc["all candidates", "count"] == 3
    assert frame.loc["the rule's target", "count"] == 1  # small's one instance, not the chain's too
    assert frame.loc["filter/kv-cache", "removed"] == "small-a" and frame.loc["filter/kv-cache", "count"] == 0
    assert frame.loc["fallback", "count"] == 2
    assert "trying big" in str(frame.loc["fallback", "detail"])
    assert frame.index.is_unique  # the second pass's filters are their own bars ("filter/kv-cache (2)")
    assert frame.loc["filter/kv-cache (2)", "count"] == 2
    assert frame.loc["ranked", "count"] == 2 and frame.loc["selected", "count"] == 1


def test_the_chain_listed_after_the_target_is_not_counted_as_ranked() -> None:
    _, trace = decide(healthy(), CONFIG, route=route(tokens=2000))  # small-a scored; big-a, big-b listed after
    frame = waterfall_stages(trace).set_index("stage")
    assert frame.loc["all candidates", "count"] == 3
    assert frame.loc["the rule's target", "count"] == 1
    assert set(str(frame.loc["the rule's target", "removed"]).split(", ")) == {"big-a", "big-b"}  # set aside
    assert frame.loc["ranked", "count"] == 1
    assert "then, not scored" in str(frame.loc["ranked", "detail"])
