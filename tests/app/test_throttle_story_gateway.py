"""A request a rule's throttle handled reads as what happened, in ``routelens trace`` and on the "Why this model" page.

The traces are the gateway's own (a real gateway in-process, real upstream servers on 127.0.0.1), read
back by ``routelens trace --db`` from a DuckDB file. A throttle without a token decides before the
target: ``reject`` refuses the request with a 429 and forwards it nowhere, ``chain`` sends it down
the chain past the target, ``wait`` sends it to the target once a token comes. The old text said
"sent the request to n" for all three (nothing was sent on a reject, and the chain skipped n).
A request that waited says how long (``waited_s``), and so does one whose ``max_wait`` ran out
first: it had been traced as a plain ``reject``, refused at once. Both are counted in ``/metrics`` too
(``routelens_rule_throttle_requests_total``, ``routelens_rule_throttle_wait_seconds``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.cli import main
from app.ui.data import policy_step, why, why_not
from app.ui.data.policy_step import fmt_waited
from router_core.decide.replay import redecide
from router_core.decide.verify import first_difference
from router_core.gateway import Gateway
from schemas import DecisionTrace
from tests.app.trace_file import trace_file_of
from tests.promtext import Samples, samples
from tests.router_core.decide.test_exact_replay import stored
from tests.router_core.gateway.gateway_kit import gateway_client, served_gateway, trace_of
from tests.router_core.gateway.test_forwarding import reply

MODELS = {"a": {"model": "m"}, "b": {"model": "n"}}  # rule to-n's target n is on b; its chain's m on a
RULE = '  - {rule_name: to-n, condition: "prompt_contains(\'to n\')", primary_target: n, '
THROTTLES = {
    "reject": RULE + "fallback_chain: [m], throttle_config: {max_rps: 0.5, burst_window: 2s, overflow: reject}}\n",
    "chain": RULE + "fallback_chain: [m], throttle_config: {max_rps: 0.5, burst_window: 2s, overflow: chain}}\n",
    "wait": RULE + "throttle_config: {max_rps: 5, burst_window: 200ms, overflow: wait, max_wait: 5s}}\n",
}
# One token every 0.5 s, one at a time; a request waits 0.7 s at most.
WAIT_OUT = RULE + "throttle_config: {max_rps: 2, burst_window: 500ms, overflow: wait, max_wait: 700ms}}\n"


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
    assert trace.policy is not None and trace.policy.waited_s is not None and 0 < trace.policy.waited_s <= 5.0
    waited = fmt_waited(trace.policy.waited_s)
    said = (f"Rule to-n matched after 1 tried; its throttle was empty, so the request waited {waited} for a token, "
            "then was sent to n.")
    assert rule_line(cli_tree(trace, tmp_path, capsys)) == said
    assert why.decision_sentence(trace).startswith(
        f"Rule to-n sent it to n once its throttle had a token (the request waited {waited}): b ")


def replays(gw: Gateway, trace: DecisionTrace) -> bool:
    """Re-decided from its stored JSON under the stored policy and rule set: the same decision."""
    assert gw.policy is not None
    policy, rules = stored(gw.config, gw.policy.rules)
    again = DecisionTrace.model_validate_json(trace.model_dump_json())
    return first_difference(again, redecide(again, policy, rules)) is None


def three_at_once() -> tuple[dict[str | None, DecisionTrace], bool, Samples]:
    """Three requests to rule to-n at once (``WAIT_OUT``), by what the throttle did; whether the waiter replays;
    the gateway's ``/metrics`` after them.

    One takes the token; the first in line gets the next, 0.5 s on; the second's would come 1 s on,
    past its 0.7 s of max_wait.
    """
    async def run() -> tuple[dict[str | None, DecisionTrace], bool, Samples]:
        async with served_gateway({"a": reply(200), "b": reply(200)}, instances=MODELS,
                                  gateway={"max_attempts": 2, "upstream_timeout_s": 5.0},
                                  policy="routing_matrix:\n" + WAIT_OUT) as (client, hooks, gw):
            chat = {"model": "auto", "messages": [{"role": "user", "content": "send this to n"}]}
            answers = await asyncio.gather(*(client.post("/v1/chat/completions", json=chat) for _ in range(3)))
            traces = [trace_of(hooks, r.headers) for r in answers]
            by = {t.policy.throttled if t.policy else "?": t for t in traces}
            assert sorted(by, key=str) == sorted([None, "wait", "reject"], key=str), [t.policy for t in traces]
            return by, replays(gw, by["wait"]), samples(await (await client.get("/metrics")).text())

    return asyncio.run(run())


def test_requests_that_queued_for_a_token_say_how_long_whether_one_came_or_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    by, waiter_replays, metrics = three_at_once()
    first, came, ran_out = by[None], by["wait"], by["reject"]
    assert first.policy is not None and first.policy.waited_s is None  # had a token at once
    assert came.policy is not None and came.policy.waited_s is not None and 0.2 < came.policy.waited_s <= 0.7
    assert [a.instance for a in came.attempts] == ["b"] and came.outcome.http_status == 200
    assert waiter_replays  # re-decided under its policy: the same decision (a replay does not wait)
    said = (f"Rule to-n matched after 1 tried; its throttle was empty, so the request waited "
            f"{fmt_waited(came.policy.waited_s)} for a token, then was sent to n.")
    assert policy_step.rule_sentence(came.policy) == said
    # max_wait ran out: refused with 429 as an immediate reject is, but having waited it out
    assert ran_out.outcome.http_status == 429 and ran_out.attempts == [] and ran_out.candidates == []
    assert ran_out.policy is not None and ran_out.policy.waited_s is not None
    assert ran_out.policy.waited_s >= 0.7  # its max_wait, waited out (how late the loop woke is no check here)
    waited = fmt_waited(ran_out.policy.waited_s)
    said = ("Rule to-n matched after 1 tried; its target would have been n, but its throttle was empty, and the "
            f"request waited {waited} (its max_wait) without a token, so it was refused with 429 "
            "(rate_limit_exceeded): nothing was forwarded.")
    assert policy_step.rule_sentence(ran_out.policy) == said
    assert rule_line(cli_tree(ran_out, tmp_path, capsys)) == said  # read back from a DuckDB file
    assert why.decision_sentence(ran_out) == (
        f"Rule to-n matched (target n), but its throttle was empty: the request waited {waited} (its max_wait) "
        "for a token that did not come, then was refused with HTTP 429 (rate_limit_exceeded) and forwarded to "
        "no instance.")
    reason = why_not.reason_for(ran_out, "b", "n")
    assert reason is not None and reason.text == (
        f"not looked at: rule to-n's throttle was empty, so the request was refused with 429 after waiting "
        f"{waited} (its max_wait) before any instance was considered")
    # /metrics: one admitted at once, one after its wait, one refused when max_wait ran out; both waits observed
    assert metrics.value("routelens_rule_throttle_requests_total", rule="to-n", action="admitted") == 1
    assert metrics.value("routelens_rule_throttle_requests_total", rule="to-n", action="wait") == 1
    assert metrics.value("routelens_rule_throttle_requests_total", rule="to-n", action="reject") == 1
    assert metrics.value("routelens_rule_throttle_wait_seconds_count", rule="to-n") == 2
    assert metrics.value("routelens_rule_throttle_wait_seconds_sum", rule="to-n") == pytest.approx(
        came.policy.waited_s + ran_out.policy.waited_s)
    assert metrics.value("routelens_rule_throttle_wait_seconds_bucket", rule="to-n", le="0.1") == 0
    assert metrics.value("routelens_rule_throttle_wait_seconds_bucket", rule="to-n", le="2.5") == 2
