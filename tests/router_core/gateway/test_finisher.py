"""TraceFinisher: the outcome is fixed at finish(); counting and emitting wait one turn of the loop; nothing is lost."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from router_core.gateway.finisher import TraceFinisher
from router_core.metrics import GatewayMetrics
from router_core.recorder import TraceRecorder
from schemas import OutcomeStatus
from schemas.trace import DecisionTrace
from tests.router_core.conftest import NOW, features


class Hooks:
    def __init__(self, fail_for: str | None = None) -> None:
        self.traces: list[DecisionTrace] = []
        self.fail_for = fail_for

    def emit(self, trace: DecisionTrace) -> bool:
        if trace.request_id == self.fail_for:
            raise RuntimeError("storage bug")
        self.traces.append(trace)
        return True


def rec(request_id: str) -> TraceRecorder:
    return TraceRecorder(request_id=request_id, ts=NOW, router_version="t", policy_hash="sha256:x",
                         query_hash="sha256:" + "0" * 64, features=features())


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def finisher(hooks: Hooks, clock: Clock) -> tuple[TraceFinisher, CollectorRegistry]:
    registry = CollectorRegistry()
    return TraceFinisher(lambda: hooks, GatewayMetrics(registry), clock), registry


def test_the_trace_is_emitted_after_the_current_turn_with_the_outcome_fixed_at_finish() -> None:
    hooks, clock = Hooks(), Clock()
    fin, registry = finisher(hooks, clock)

    async def handler() -> None:
        clock.now = 10.004  # 4 ms after the request's t0 of 10.0
        fin.finish(rec("r1"), 10.0, 200)
        fin.finish(rec("r2"), 10.0, 502, "upstream_502")
        assert hooks.traces == [] and fin.pending() == 2  # nothing yet: the answer is still being written
        clock.now = 99.0  # later work does not change the recorded time
        await asyncio.sleep(0)

    asyncio.run(handler())
    assert [t.request_id for t in hooks.traces] == ["r1", "r2"] and fin.pending() == 0
    assert hooks.traces[0].outcome.total_ms == pytest.approx(4.0)
    assert (hooks.traces[1].outcome.status, hooks.traces[1].outcome.error_class) == (OutcomeStatus.ERROR,
                                                                                      "upstream_502")
    counted = registry.get_sample_value("routelens_gateway_requests_total", {"model": "", "instance": "",
                                                                             "code": "502"})
    assert counted == 1.0


def test_one_failing_emit_does_not_cost_the_others_their_traces() -> None:
    hooks, clock = Hooks(fail_for="bad"), Clock()
    fin, _ = finisher(hooks, clock)
    for rid in ("a", "bad", "c"):
        fin.finish(rec(rid), 10.0, 200)  # no running loop: emitted at once
    assert [t.request_id for t in hooks.traces] == ["a", "c"]


def test_flush_emits_what_is_still_queued_when_the_loop_stops() -> None:
    hooks, clock = Hooks(), Clock()
    fin, _ = finisher(hooks, clock)

    async def last_request() -> None:
        fin.finish(rec("r1"), 10.0, 200)
        fin.flush()  # the gateway's shutdown, before its storage closes

    asyncio.run(last_request())
    assert [t.request_id for t in hooks.traces] == ["r1"]


def test_a_shadow_runs_before_the_trace_is_emitted_and_its_failure_keeps_the_trace() -> None:
    hooks, clock = Hooks(), Clock()
    fin, _ = finisher(hooks, clock)
    failing = rec("r1")

    def broken() -> None:
        raise ValueError("shadow bug")

    failing.pending_shadow = broken  # type: ignore[assignment]
    fin.finish(failing, 10.0, 200)
    assert [t.request_id for t in hooks.traces] == ["r1"] and hooks.traces[0].shadow is None
