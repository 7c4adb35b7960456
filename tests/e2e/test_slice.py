"""One request traced end to end: OpenAI SDK -> gateway -> simulated instance -> DuckDB -> lookup."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from openai import OpenAI

from schemas import AttemptStatus, DecisionTrace, query_hash
from tests.e2e.conftest import ROOT, Stack
from tests.e2e.net import call, drained, metrics

pytestmark = pytest.mark.e2e
QUESTION = "请分析合同第３条的违约责任条款"


def get_trace(stack: Stack, request_id: str) -> DecisionTrace:
    status, body = call("GET", f"{stack.gateway}/v1/traces/{request_id}")
    assert status == 200, body
    return DecisionTrace.model_validate(body)


def client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.gateway}/v1", api_key="not-needed", max_retries=0, timeout=20)


def test_a_request_is_routed_answered_and_traced(stack: Stack) -> None:
    raw = client(stack).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": QUESTION}]
    )
    completion = raw.parse()
    request_id = raw.headers["x-request-id"]
    assert completion.choices[0].message.content
    assert raw.headers["x-routelens-model"] == completion.model

    trace = get_trace(stack, request_id)
    assert trace.request_id == request_id
    assert trace.selected_instance == raw.headers["x-routelens-instance"]
    assert trace.selected_model == completion.model
    assert {c.instance for c in trace.candidates} == set(stack.instances)
    assert [s.step for s in trace.decision_trace][:2] == ["analyse", "policy"]
    assert any(s.step == "pick" for s in trace.decision_trace)
    assert trace.query_hash == query_hash(QUESTION)
    assert trace.outcome.http_status == 200 and trace.outcome.completion_tokens
    assert trace.attempts[0].status is AttemptStatus.OK
    # Privacy: the question is nowhere in what is stored or served.
    assert "违约责任" not in trace.model_dump_json()

    cli = [sys.executable, "-m", "app", "trace", request_id, "--api", stack.gateway]
    out = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert request_id in out.stdout and trace.selected_instance in out.stdout

    unknown = subprocess.run([*cli[:4], "req_does_not_exist", "--api", stack.gateway],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1 and "no trace" in unknown.stderr


def test_streaming_passes_through_and_is_traced(stack: Stack) -> None:
    with client(stack).chat.completions.with_streaming_response.create(
        model="small", stream=True, messages=[{"role": "user", "content": "write a python function to add two numbers"}]
    ) as resp:
        request_id = resp.headers["x-request-id"]
        text = "".join(chunk.choices[0].delta.content or "" for chunk in resp.parse() if chunk.choices)
    assert text
    trace = get_trace(stack, request_id)
    assert trace.features.stream and trace.selected_model == "small"
    assert trace.outcome.ttft_ms is not None


def _latch(stack: Stack, instance: str) -> dict[str, Any]:
    _, state = call("GET", f"{stack.gateway}/v1/router/state")
    snap = next(s for s in state["instances"] if s["instance"] == instance)
    return next(latch for latch in snap["latches"] if latch["constraint"] == "kv-cache")


def _wait_latch(stack: Stack, instance: str, out: bool, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while (latch := _latch(stack, instance))["out"] != out and time.monotonic() < deadline:
        time.sleep(0.1)
    assert latch["out"] == out, latch
    return latch


def _routed(stack: Stack, n: int, tag: str) -> list[str]:
    out = []
    for i in range(n):
        raw = client(stack).chat.completions.with_raw_response.create(
            model="big", messages=[{"role": "user", "content": f"ticket {i}"}],
            extra_headers={"X-Request-Id": f"{tag}-{i}"})
        out.append(raw.headers["x-routelens-instance"])
    return out


def test_traffic_leaves_an_instance_past_its_kv_threshold_after_the_dwell_and_returns_after_recovery(
    stack: Stack,
) -> None:
    # Default constraint: leave above 85% after 2 s, come back below 80% after 5 s (the seed's numbers).
    hot = "big-a"
    breach_at = datetime.now(UTC)
    assert call("POST", f"{stack.instances[hot]}/admin/overrides", {"kv_cache_usage": 0.95})[0] == 200
    try:
        out = _wait_latch(stack, hot, out=True)
        assert datetime.fromisoformat(out["since"]) - breach_at >= timedelta(seconds=2)  # not before the dwell
        assert out["value"] == pytest.approx(0.95)
        assert set(_routed(stack, 8, "hot")) == {"big-b"}
        trace = get_trace(stack, "hot-0")
        (violation,) = next(c for c in trace.candidates if c.instance == hot).violations
        assert (violation.constraint, violation.value, violation.threshold) == ("kv-cache", 0.95, 0.85)
        assert violation.since is not None
    finally:
        recovered_at = datetime.now(UTC)
        call("POST", f"{stack.instances[hot]}/admin/overrides", {"kv_cache_usage": None})
    back = _wait_latch(stack, hot, out=False)
    assert datetime.fromisoformat(back["since"]) - recovered_at >= timedelta(seconds=5)  # not before enter_for
    assert hot in _routed(stack, 20, "cool")  # ties between the two idle instances spread again


def test_client_request_id_is_kept(stack: Stack) -> None:
    raw = client(stack).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hello"}], extra_headers={"X-Request-Id": "ops-4711"})
    assert raw.headers["x-request-id"] == "ops-4711"
    assert get_trace(stack, "ops-4711").request_id == "ops-4711"


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "auto"}, 400, "messages"),
        (b"{not json", 400, None),
        ({"model": "auto", "messages": "hi"}, 400, "messages"),
        ({"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}, 404, "model"),
    ],
)
def test_bad_requests_get_openai_style_errors(stack: Stack, body: Any, status: int, param: str | None) -> None:
    code, payload = call("POST", f"{stack.gateway}/v1/chat/completions", body)
    assert code == status
    assert set(payload["error"]) == {"message", "type", "param", "code"}
    assert payload["error"]["type"] == "invalid_request_error" and payload["error"]["param"] == param
    status, body = call("GET", f"{stack.gateway}/health")
    assert (status, body["status"], body["storage"]["spool"]) == (200, "ok", "ok")  # still serving


def test_feedback_is_accepted_validated_and_counted(stack: Stack) -> None:
    good = {"request_id": "ops-4711", "correct": False, "expected_class": "contract", "expected_model": "big"}
    status, accepted = call("POST", f"{stack.gateway}/v1/feedback", good)
    assert status == 202 and accepted["status"] == "accepted"
    assert accepted["learned"]["instance"] == "solo-a" and accepted["learned"]["divergent"] is False
    code, payload = call("POST", f"{stack.gateway}/v1/feedback", {"request_id": "x"})
    assert code == 400 and payload["error"]["param"] == "correct"
    code, payload = call("POST", f"{stack.gateway}/v1/feedback", b"[1, 2]")
    assert code == 400
    assert metrics(stack.gateway).value("routelens_gateway_feedback_total", correct="false") == 1.0


def test_unknown_trace_id_is_a_404(stack: Stack) -> None:
    code, payload = call("GET", f"{stack.gateway}/v1/traces/nope")
    assert code == 404 and payload["error"]["code"] == "trace_not_found"


def test_traces_are_committed_to_duckdb_not_only_held_in_memory(stack: Stack) -> None:
    c = drained(stack.gateway, timeout_s=10, every=0.05)
    assert c.value("routelens_traces_written_total") == c.value("routelens_traces_queued_total") >= 10
    assert c.value("routelens_traces_dropped_total") == 0
    assert c.value("routelens_router_decision_duration_seconds_count") >= 10


def test_an_unreachable_instance_is_a_recorded_failed_attempt(stack: Stack) -> None:
    # The gateway has fresh state for solo-a; its process now dies before the next request.
    stack.solo_fleet.stop()
    code, payload = call("POST", f"{stack.gateway}/v1/chat/completions",
                         {"model": "solo", "messages": [{"role": "user", "content": "anyone there?"}]},
                         headers={"X-Request-Id": "req-solo-down"})
    assert code == 502 and payload["error"]["code"] == "all_attempts_failed"
    trace = get_trace(stack, "req-solo-down")
    assert [a.status for a in trace.attempts] == [AttemptStatus.CONNECT_ERROR]
    assert trace.attempts[0].instance == "solo-a"
    assert trace.outcome.http_status == 502 and trace.outcome.error_class == "all_attempts_failed"


def test_the_sdk_lists_and_retrieves_the_models(stack: Stack) -> None:
    """models.retrieve was a 404 for every model, and every model's created was 0 (the API audit)."""
    import openai

    sdk = client(stack)
    listed = sdk.models.list().data
    assert listed[0].id == "auto" and {m.created for m in listed} != {0}
    for card in listed:
        got = sdk.models.retrieve(card.id)
        assert (got.id, got.created, got.owned_by) == (card.id, card.created, "routelens")
    with pytest.raises(openai.NotFoundError) as exc:
        sdk.models.retrieve("no-such-model")
    assert exc.value.code == "model_not_found"
