"""TraceFinisher: a trace is durable before finish() returns; a shadowed one waits a turn; none is lost."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from ingest.codec.encoder import Encoder
from ingest.kinds import Kind
from router_core.decide.recorder import TraceRecorder
from router_core.gateway.finisher import TraceFinisher
from router_core.metrics import GatewayMetrics
from schemas import OutcomeStatus
from schemas.trace import DecisionTrace
from tests.router_core.conftest import NOW, features
from tests.router_core.gateway.quiet_hooks import QuietHooks


class Hooks(QuietHooks):
    def __init__(self, fail_for: str | None = None) -> None:
        self.traces: list[DecisionTrace] = []
        self.fail_for = fail_for

    def emit(self, trace: DecisionTrace) -> bool:
        if trace.request_id == self.fail_for:
            raise RuntimeError("storage bug")
        self.traces.append(trace)
        return True


def rec(request_id: str, shadow: object = None) -> TraceRecorder:
    r = TraceRecorder(request_id=request_id, ts=NOW, router_version="t", policy_hash="sha256:x",
                      query_hash="sha256:" + "0" * 64, features=features())
    r.defer_shadow(shadow)  # type: ignore[arg-type]
    return r


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def finisher(hooks: Hooks, clock: Clock) -> tuple[TraceFinisher, CollectorRegistry]:
    registry = CollectorRegistry()
    return TraceFinisher(lambda: hooks, GatewayMetrics(registry), clock), registry


def test_a_trace_is_emitted_and_counted_before_finish_returns() -> None:
    hooks, clock = Hooks(), Clock()
    fin, registry = finisher(hooks, clock)

    async def handler() -> None:
        clock.now = 10.004  # 4 ms after the request's t0 of 10.0
        fin.finish(rec("r1"), 10.0, 200)
        fin.finish(rec("r2"), 10.0, 502, "upstream_502")
        # durable before the answer is sent: a kill -9 now loses no answered request's trace
        assert [t.request_id for t in hooks.traces] == ["r1", "r2"] and fin.pending() == 0

    asyncio.run(handler())
    assert hooks.traces[0].outcome.total_ms == pytest.approx(4.0)
    assert (hooks.traces[1].outcome.status, hooks.traces[1].outcome.error_class) == (OutcomeStatus.ERROR,
                                                                                      "upstream_502")
    counted = registry.get_sample_value("routelens_gateway_requests_total", {"model": "", "instance": "",
                                                                             "code": "502"})
    assert counted == 1.0


def test_a_shadowed_trace_waits_one_turn_with_its_outcome_fixed_at_finish() -> None:
    hooks, clock = Hooks(), Clock()
    fin, _ = finisher(hooks, clock)
    ran: list[str] = []

    async def handler() -> None:
        clock.now = 10.002
        fin.finish(rec("r1", shadow=lambda: ran.append("shadow")), 10.0, 200)
        assert hooks.traces == [] and fin.pending() == 1 and ran == []
        clock.now = 99.0  # the shadow's own time does not count in the request's
        await asyncio.sleep(0)

    asyncio.run(handler())
    assert ran == ["shadow"] and [t.request_id for t in hooks.traces] == ["r1"]
    assert hooks.traces[0].outcome.total_ms == pytest.approx(2.0)


def test_a_failing_shadow_or_emit_in_the_queue_does_not_cost_the_others_their_traces() -> None:
    hooks, clock = Hooks(fail_for="bad"), Clock()
    fin, _ = finisher(hooks, clock)

    def broken() -> None:
        raise ValueError("shadow bug")

    async def handler() -> None:
        for rid in ("a", "bad", "c"):
            fin.finish(rec(rid, shadow=broken), 10.0, 200)
        await asyncio.sleep(0)

    asyncio.run(handler())
    assert [t.request_id for t in hooks.traces] == ["a", "c"] and all(t.shadow is None for t in hooks.traces)


def test_flush_emits_what_is_still_queued_when_the_loop_stops() -> None:
    hooks, clock = Hooks(), Clock()
    fin, _ = finisher(hooks, clock)

    async def last_request() -> None:
        fin.finish(rec("r1", shadow=lambda: None), 10.0, 200)
        fin.flush()  # the gateway's shutdown, before its storage closes

    asyncio.run(last_request())
    assert [t.request_id for t in hooks.traces] == ["r1"]


class PlainHooks(Hooks):
    """Hooks of a store that validates what it stores: they take the recorder's plain values."""

    takes_plain = True

    def __init__(self) -> None:
        super().__init__()
        self.plain: list[dict[str, object]] = []

    def emit_plain(self, values: dict[str, object]) -> bool:
        self.plain.append(values)
        return True


def test_hooks_that_take_plain_values_get_them_unvalidated_and_the_same_trace() -> None:
    plain_hooks, hooks, clock = PlainHooks(), Hooks(), Clock()
    plain_fin, _ = finisher(plain_hooks, clock)
    fin, _ = finisher(hooks, clock)
    assert not plain_fin.validates and fin.validates  # a prebuild would be wasted on the first

    async def handler() -> None:
        clock.now = 10.003
        plain_fin.finish(rec("r1"), 10.0, 200)
        fin.finish(rec("r1"), 10.0, 200)
        assert len(plain_hooks.plain) == 1 and plain_hooks.traces == []  # durable before finish() returns

    asyncio.run(handler())
    (values,) = plain_hooks.plain
    assert list(values) == list(DecisionTrace.model_fields)  # every field, in the contract's order
    assert DecisionTrace.model_validate(values) == hooks.traces[0]


class PlainRefusingHooks(Hooks):
    """Hooks that define ``emit_plain`` but say they take no plain values (``takes_plain`` False)."""

    def emit_plain(self, values: dict[str, object]) -> bool:
        raise AssertionError("emit_plain called on hooks that take validated traces")


def test_whether_hooks_take_plain_values_is_what_they_say_not_what_they_define() -> None:
    hooks, clock = PlainRefusingHooks(), Clock()
    fin, _ = finisher(hooks, clock)  # before: emit_plain was found by name and called
    assert fin.validates

    async def handler() -> None:
        fin.finish(rec("r1"), 10.0, 200)

    asyncio.run(handler())
    assert [t.request_id for t in hooks.traces] == ["r1"]


class EncodingHooks(QuietHooks):
    """Hooks that encode each trace as the trace pipeline does (the spool's encoder: orjson)."""

    def __init__(self) -> None:
        self.encoder = Encoder()
        self.payloads: list[tuple[Kind, bytes]] = []

    def emit(self, trace: DecisionTrace) -> bool:
        self.payloads += self.encoder.encode(trace)
        return True


class PlainEncodingHooks(EncodingHooks):
    takes_plain = True

    def emit_plain(self, values: dict[str, Any]) -> bool:
        self.payloads += self.encoder.plain_trace(values)
        return True


@pytest.mark.parametrize("hooks_class", [PlainEncodingHooks, EncodingHooks], ids=["plain", "validated"])
def test_a_trace_holding_text_that_is_not_utf8_is_stored_escaped_and_said_never_lost(
        hooks_class: type[EncodingHooks], caplog: pytest.LogCaptureFixture) -> None:
    hooks, clock = hooks_class(), Clock()
    fin, _ = finisher(hooks, clock)  # type: ignore[arg-type]  (encoding hooks, not the recording ones)
    bad = TraceRecorder(request_id="r1", ts=NOW, router_version="v-\udcff", policy_hash="sha256:x",
                        query_hash="sha256:" + "0" * 64, features=features())  # a header byte aiohttp could not decode

    with caplog.at_level(logging.ERROR, logger="router_core.gateway.finisher"):
        fin.finish(bad, 10.0, 200)  # before: orjson's TypeError, and the trace was lost
    (stored,) = [orjson.loads(p) for k, p in hooks.payloads if k in (Kind.TRACE, Kind.TRACE_UNCHECKED)]
    assert (stored["request_id"], stored["router_version"]) == ("r1", "v-\\xff")  # the byte, escaped as text
    (said,) = caplog.records
    assert "r1" in said.getMessage() and "router_version" in said.getMessage()

    def broken(_: object) -> bool:
        raise TypeError("a storage bug")

    setattr(hooks, "emit_plain" if isinstance(hooks, PlainEncodingHooks) else "emit", broken)
    with pytest.raises(TypeError, match="a storage bug"):  # not a string it could not encode: not hidden
        fin.finish(rec("r2"), 10.0, 200)
