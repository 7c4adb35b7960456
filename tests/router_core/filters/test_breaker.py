"""BreakerFilter: the board's open breakers, handed to the decision, reject with their scope and reason."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from router_core.decide.decision import DecisionContext
from router_core.filters.breaker import BreakerFilter
from router_core.framework import Candidate, Effective, Handle
from router_core.resilience.breakers import BreakerBoard
from schemas.config.resilience import BreakerSettings
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import RequestFeatures

SPECS = [InstanceSpec(id="a", model="m", url="http://a"), InstanceSpec(id="b", model="n", url="http://b")]


def candidate(spec: InstanceSpec) -> Candidate:
    return Candidate(spec, InstanceSnapshot(instance=spec.id, model=spec.model), None)  # type: ignore[arg-type]


CTX = DecisionContext(request_id="r", features=RequestFeatures.model_construct(), intent=None,
                      now=datetime(2026, 1, 1, tzinfo=UTC), quality={})

CASES = [("none", None, None), ("instance", "a", "breaker_instance"), ("model", "m", "breaker_model")]


@pytest.mark.parametrize(("scope", "name", "metric"), CASES, ids=[c[0] for c in CASES])
def test_open_breakers_reject(scope: str, name: str | None, metric: str | None) -> None:
    board = BreakerBoard(BreakerSettings(), SPECS, clock=lambda: 0.0)
    flt = BreakerFilter.from_spec(None, BreakerFilter.Params(), Handle())
    if name is not None:
        b = board.get(scope, name)
        assert b is not None
        board._open(b, "test", 0.0)
    ctx = replace(CTX, blocked=board.blocked(SPECS))
    assert (ctx.blocked is None) == (name is None)
    v = flt.check(candidate(SPECS[0]), ctx)
    assert (v.metric if v else None) == metric
    if v is not None:
        assert v.severity == "hard" and v.value == 2.0 and "test" in v.reason
    assert flt.check(candidate(SPECS[1]), ctx) is None


def test_nothing_blocked_keeps_everyone() -> None:
    flt = BreakerFilter.from_spec(None, BreakerFilter.Params(), Handle())
    assert flt.check(candidate(SPECS[0]), CTX) is None
    assert Effective is not None
