"""context-window-filter: estimated input tokens + max_tokens must fit the instance's context window."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from router_core.decide.builtin import build_router
from schemas.common import StepKind
from tests.router_core.conftest import decide, features, healthy
from tests.router_core.plugin_kit import (
    BadParams,
    assert_filter_step,
    assert_refused,
    build,
    candidate,
    context,
    plugins_config,
    route,
    step,
    weights,
)

TYPE = "context-window-filter"


@dataclass(frozen=True)
class Case:
    id: str
    tokens: int
    max_tokens: int | None
    window: int
    reason: str | None  # None: kept


CASES = [
    Case("small-request", 100, None, 8192, None),
    Case("exactly-full", 8000, 192, 8192, None),
    Case("one-over", 8000, 193, 8192, "needs ~8193 tokens, window is 8192"),
    Case("prompt-alone-too-long", 8193, None, 8192, "needs ~8193 tokens, window is 8192"),
    Case("max-tokens-zero", 8192, 0, 8192, None),
    Case("output-counts", 10, 40000, 32768, "needs ~40010 tokens, window is 32768"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_check(case: Case) -> None:
    flt = build(TYPE)
    assert flt.name == "context-window"
    v = flt.check(candidate(spec={"context_window": case.window}), context(tokens=case.tokens,
                                                                          max_tokens=case.max_tokens))
    if case.reason is None:
        assert v is None
        return
    assert v is not None
    need = case.tokens + (case.max_tokens or 0)
    assert (v.constraint, v.metric, v.op, v.value, v.threshold, v.severity, v.reason) == (
        "context-window", "tokens", "<=", float(need), float(case.window), "hard", case.reason)


BAD = [BadParams("takes-no-parameters", {"margin": 10}, "margin")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


def test_the_router_records_the_step() -> None:
    cfg = plugins_config([{"type": TYPE, "name": "fits"}, {"type": "kv-cache-scorer", "weight": 1.0}])
    # healthy(): big-a KV .5, big-b KV .2 (32k windows); small-a (8k window) cannot take 9000 tokens.
    ranked, trace = decide(healthy(), cfg, feats=features(tokens=8000, max_tokens=1000))
    assert ranked == ["big-b", "big-a"]
    assert_filter_step(trace, "fits", TYPE, kept=2, rejected=["small-a"])
    assert weights(trace) == [("mem", 1.0, "mem/kv-cache-scorer")]
    assert step(trace, "pick").instances == ["big-b"]


def test_every_request_is_judged_afresh() -> None:
    # Not state-only: the same snapshots judged for a short, then a long request give different verdicts.
    router = build_router(plugins_config([{"type": TYPE}, {"type": "kv-cache-scorer", "weight": 1.0}]))
    state = healthy()
    short, _ = route(router, state, feats=features(tokens=100))
    long, trace = route(router, state, feats=features(tokens=9000))
    assert short == ["big-b", "small-a", "big-a"] and long == ["big-b", "big-a"]
    assert step(trace, "filter/context-window").kind is StepKind.FILTER
