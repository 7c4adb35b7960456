"""A request a rule's throttle handled reads as what happened, in ``routelens trace`` and on the "Why this model" page.

The traces are the gateway's own (a real gateway in-process, real upstream servers on 127.0.0.1), read
back by ``routelens trace --db`` from a DuckDB file. A throttle without a token decides before the
target: ``reject`` refuses the request with a 429 and forwards it nowhere, ``chain`` sends it down
the chain past the target, ``wait`` sends it to the target once a token comes. The old text said
"sent the request to n" for all three (nothing was sent on a reject, and the chain skipped n).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.cli import main
from app.ui.data import policy_step, why, why_not
from schemas import DecisionTrace
from tests.app.trace_file import trace_file_of
from tests.router_core.gateway.gateway_kit import gateway_client, trace_of
from tests.router_core.gateway.test_forwarding import reply

MODELS = {"a": {"model": "m"}, "b": {"model": "n"}}  # rule to-n's target n is on b; its chain's m on a
RULE = '  - {rule_name: to-n, condition: "prompt_contains(\'to n\')", primary_target: n, '
THROTTLES = {
    "reject": RULE + "fallback_chain: [m], throttle_config: {max_rps: 0.5, burst_window: 2s, overflow: reject}}\n",
    "chain": RULE + "fallback_chain: [m], throttle_config: {max_rps: 0.5, burst_window: 2s, overflow: chain}}\n",
    "wait": RULE + "throttle_config: {max_rps: 5, burst_window: 200ms, overflow: wait, max_wait: 5s}}\n",
}


def second_request(overflow: str) -> DecisionTrace:
    """The trace of the second of two requests to rule to-n: the first took the throttle's only token."""
    async def run() -> DecisionTrace:
        async with gateway_client({"a": reply(200), "b": reply(200)}, instances=MODELS,
                                  policy="routing_matrix:\n" + THROTTLES[overflow]) as (client, hooks):
            chat = {"model": "auto", "messages": [{"role": "user", "content": "send this to n"}]}
            first = await client.post("/v1/chat/completions", json=chat)
            assert first.status == 200 and first.headers["x-routelens-instance"] == "b"
            second = await client.post("/v1/chat/completions", json=chat)
            return trace_of(hooks, second.headers)

    trace = asyncio.run(run())
    assert trace.policy is not None and trace.policy.throttled == overflow  # what the gateway traced
    return trace


def cli_tree(trace: DecisionTrace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``routelens trace ID --db FILE`` on a DuckDB file holding ``trace``."""
    path = trace_file_of(tmp_path / "traces.duckdb", [trace])
    assert main(["trace", trace.request_id, "--db", str(path)]) == 0
    return capsys.readouterr().out


def rule_line(tree: str) -> str:
    """The tree's line under "Routing rule" (the rule sentence), unwrapped."""
    lines = tree.splitlines()
    at = next(i for i, line in enumerate(lines) if "Routing rule" in line)
    text = []
    for line in lines[at + 1:]:
        if "tried to-n" in line:
            break
        text.append(line.lstrip(" │├└─").strip())
    return " ".join(text)


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: only --db chooses the source


def test_a_refused_request_reads_refused_with_429_and_forwarded_nowhere(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = second_request("reject")
    assert trace.outcome.http_status == 429 and trace.attempts == [] and trace.candidates == []
    said = ("Rule to-n matched after 1 tried; its target would have been n, but its throttle was empty, so the "
            "request was refused with 429 (rate_limit_exceeded): nothing was forwarded. Chain m; not tried.")
    assert trace.policy is not None and policy_step.rule_sentence(trace.policy) == said
    tree = cli_tree(trace, tmp_path, capsys)
    assert rule_line(tree) == said
    assert "sent the request to" not in tree
    assert why.decision_sentence(trace) == (
        "Rule to-n matched (target n), but its throttle was empty: the request was refused with HTTP 429 "
        "(rate_limit_exceeded) and forwarded to no instance.")
    for instance, model in (("b", "n"), ("a", "m")):  # the target's instance and the chain's: neither looked at
        reason = why_not.reason_for(trace, instance, model)
        assert reason is not None and reason.text == (
            "not looked at: rule to-n's throttle was empty, so the request was refused with 429 before any "
            "instance was considered")


def test_a_request_sent_down_the_chain_reads_so_and_skips_the_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = second_request("chain")
    assert [a.instance for a in trace.attempts] == ["a"]
    said = ("Rule to-n matched after 1 tried; its target would have been n, but its throttle was empty, so the "
            "request went down its chain instead. Chain m; used m.")
    assert rule_line(cli_tree(trace, tmp_path, capsys)) == said
    assert why.decision_sentence(trace).startswith(
        "Rule to-n matched (target n) and its throttle sent it down its chain: a ")
    reason = why_not.reason_for(trace, "b", "n")
    assert reason is not None and reason.text == (
        "skipped: rule to-n's throttle was empty, so the request went down its chain past its target n")


def test_a_request_that_waited_reads_sent_after_the_wait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = second_request("wait")
    assert [a.instance for a in trace.attempts] == ["b"] and trace.outcome.http_status == 200
    said = ("Rule to-n matched after 1 tried; its throttle was empty, so the request waited for a token, then was "
            "sent to n.")
    assert rule_line(cli_tree(trace, tmp_path, capsys)) == said
    assert why.decision_sentence(trace).startswith(
        "Rule to-n sent it to n once its throttle had a token (the request waited): b ")
