"""The routing DSL: the seed text verbatim, every WITH option, routing as intended, located errors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from router_core.errors import PolicyError
from router_core.rules.condition.why_not import MORE
from router_core.rules.dsl import compile_dsl
from router_core.rules.ir import Origin, RuleSet, Throttle, TimeoutPolicy
from router_core.rules.request import RequestView

# The seed, verbatim: leading indentation, trailing spaces after three lines, newlines between keywords.
SEED = (
    '  IF intent == "legal" AND file_type == "pdf" \n'
    '    THEN route_to("qwen-vl") \n'
    '    WITH timeout=8000ms, fallback="llama3-8b"\n'
    "  ELSE IF query_length > 1024 \n"
    '    THEN route_to("llama3-8b") \n'
    '    WITH compression="flash-attn"\n'
)


def view(**kw: Any) -> RequestView:
    base: dict[str, Any] = dict(
        input_length=100, query_length=50, language="en", intent=None, intent_confidence=None, file_types=(),
        has_attachments=False, request_time=datetime(2024, 5, 6, 10, tzinfo=UTC),
    )
    base.update(kw)
    return RequestView(**base)


def test_seed_compiles_to_two_rules() -> None:
    first, second = compile_dsl(SEED, source="policy.dsl")
    assert (first.name, first.primary, first.chain, first.requires) == ("clause-1", "qwen-vl", ("llama3-8b",), ())
    assert first.timeout == TimeoutPolicy(initial_timeout_s=8.0)
    assert first.origin == Origin("policy.dsl", 1, 3)
    assert first.condition is not None and first.condition.text == 'intent == "legal" AND file_type == "pdf"'
    assert (second.name, second.primary, second.chain, second.requires) == ("clause-2", "llama3-8b", (),
                                                                            ("flash-attn",))
    assert second.timeout is None and second.origin == Origin("policy.dsl", 4, 8)


ROUTING = [
    ("legal-pdf", view(intent="legal", file_types=("pdf",), has_attachments=True), "clause-1"),
    ("legal-pdf-long-query", view(intent="legal", file_types=("pdf",), query_length=5000), "clause-1"),
    ("legal-docx-long-query", view(intent="legal", file_types=("docx",), query_length=2000), "clause-2"),
    ("long-query", view(query_length=1025), "clause-2"),
    ("query-at-1024", view(query_length=1024), None),
    ("legal-no-file", view(intent="legal"), None),
    ("nothing", view(), None),
]


@pytest.mark.parametrize(("req", "rule"), [c[1:] for c in ROUTING], ids=[c[0] for c in ROUTING])
def test_seed_routes_as_intended(req: RequestView, rule: str | None) -> None:
    rules = RuleSet(compile_dsl(SEED), source="policy.dsl")
    match = rules.match(req, explain="all")
    assert (match.rule.name if match.rule else None) == rule
    first = match.tried[0]
    if first.matched:
        assert first.detail[0].startswith('intent == "legal": ')
    else:  # the atom that failed, with the value it read
        assert first.detail[0] in ("intent = null != \"legal\"", 'file_type = "docx" != "pdf"',
                                   "file_type = null != \"pdf\"")
    quick = rules.match(req)  # the request path: the first atom that failed each rule before the match
    assert quick.rule is match.rule
    assert [t.detail for t in quick.tried] == [
        t.detail if t.matched or len(t.detail) == 1 else [t.detail[0], MORE] for t in match.tried]


def test_else_comments_and_keyword_case() -> None:
    text = """
    # the legal desk
    if intent == "legal" then route_to('qwen-vl')   # a comment after a clause
    Else If has_attachments Then Route_To("vl") with Priority=high
    else route_to("llama3-8b") WITH fallback=["a", "b"], timeout=1.5s, retry_backoff=200ms
    """
    rules = compile_dsl(text, source="p.dsl", line=10, col=5)
    assert [r.name for r in rules] == ["clause-1", "clause-2", "else"]
    assert [r.origin for r in rules] == [Origin("p.dsl", 12, 5), Origin("p.dsl", 13, 10), Origin("p.dsl", 14, 5)]
    assert rules[1].priority == 2 and rules[2].condition is None
    assert rules[2].chain == ("a", "b") and rules[2].timeout == TimeoutPolicy(1.5, 0.2)
    assert RuleSet(rules, "p.dsl").match(view()).rule is rules[2]


OPTIONS = [
    ("timeout-s", "timeout=8s", "timeout", TimeoutPolicy(8.0)),
    ("timeout-m", "timeout=2m", "timeout", TimeoutPolicy(120.0)),
    ("priority-low", "priority=low", "priority", 0),
    ("priority-normal", "priority=NORMAL", "priority", 1),
    ("priority-int", "priority=5", "priority", 5),
    # As a routing matrix's throttle_config: a second's wait unless max_wait says otherwise, a token at least.
    ("throttle-default", "max_rps=10", "throttle", Throttle(rate=10.0, burst=10.0, overflow="chain", max_wait_s=1.0)),
    ("throttle", "max_rps=20, burst_window=500ms, overflow=reject", "throttle",
     Throttle(rate=20.0, burst=10.0, overflow="reject", max_wait_s=1.0)),
    ("throttle-wait", "max_rps=2.5, burst_window=4s, overflow=wait", "throttle",
     Throttle(rate=2.5, burst=10.0, overflow="wait", max_wait_s=1.0)),
    ("throttle-wait-long", 'max_rps=2, overflow=wait, max_wait=3s, bucket="shared"', "throttle",
     Throttle(rate=2.0, burst=2.0, overflow="wait", max_wait_s=3.0, bucket="shared")),
    ("throttle-slow", "max_rps=0.5", "throttle", Throttle(rate=0.5, burst=1.0, overflow="chain", max_wait_s=1.0)),
    ("fallback-one", 'fallback="b"', "chain", ("b",)),
]


@pytest.mark.parametrize(("with_", "attr", "expected"), [c[1:] for c in OPTIONS], ids=[c[0] for c in OPTIONS])
def test_with_options(with_: str, attr: str, expected: object) -> None:
    (rule,) = compile_dsl(f'IF true THEN route_to("m") WITH {with_}')
    assert getattr(rule, attr) == expected


ERRORS = [  # (id, text, FILE:LINE:COL with the text at line 3, col 7 of p.yaml, message fragment)
    ("empty", "  \n  # only a comment\n", "p.yaml:3:7", "the DSL is empty"),
    ("no-then", 'IF intent == "x" route_to("m")', "p.yaml:3:24", "unexpected 'route_to'; expected"),
    ("missing-target", "IF true THEN route_to()", "p.yaml:3:29", "unexpected ')'; expected a string in quotes"),
    ("condition-unknown-feature", 'IF\n  tokens > 3 THEN route_to("m")', "p.yaml:4:3", "unknown feature 'tokens'"),
    ("condition-type", 'IF language > 3 THEN route_to("m")', "p.yaml:3:10", "> compares numbers"),
    ("unknown-option", 'IF true THEN route_to("m") WITH speed=3', "p.yaml:3:39", "unknown option 'speed'; known:"),
    ("duplicate-option", 'IF true THEN route_to("m")\n WITH timeout=1s, timeout=2s', "p.yaml:4:19",
     "timeout is given twice (first at line 4)"),
    ("bad-duration", 'IF true THEN route_to("m") WITH timeout=8000x', "p.yaml:3:47", "bad duration '8000x'"),
    ("duration-without-unit", 'IF true THEN route_to("m") WITH timeout=8000', "p.yaml:3:47", "write it as 8000ms"),
    ("burst-without-rps", 'IF true THEN route_to("m") WITH burst_window=2s', "p.yaml:3:39", "needs max_rps"),
    ("bad-overflow", 'IF true THEN route_to("m") WITH max_rps=3, overflow=drop', "p.yaml:3:59", "overflow is chain"),
    ("bad-rps", 'IF true THEN route_to("m") WITH max_rps=0', "p.yaml:3:47", "above zero"),
    ("wait-without-rps", 'IF true THEN route_to("m") WITH max_wait=2s', "p.yaml:3:39", "needs max_rps"),
    ("wait-too-long", 'IF true THEN route_to("m") WITH max_rps=1, max_wait=2m', "p.yaml:3:59", "at most 60s"),
    ("bad-priority", 'IF true THEN route_to("m") WITH priority=urgent', "p.yaml:3:48", "priority is high"),
    ("list-for-scalar", 'IF true THEN route_to("m") WITH compression=["a"]', "p.yaml:3:51", "not a list"),
    ("empty-target", 'IF true THEN route_to("  ")', "p.yaml:3:29", "expected a model name"),
    ("else-not-last", 'ELSE route_to("m")', "p.yaml:3:7", "unexpected 'ELSE'; expected IF"),
    ("two-elses", 'IF true THEN route_to("a") ELSE route_to("b") ELSE route_to("c")', "p.yaml:3:53",
     "unexpected 'ELSE'"),
]


@pytest.mark.parametrize(("text", "where", "fragment"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_are_located(text: str, where: str, fragment: str) -> None:
    with pytest.raises(PolicyError) as info:
        compile_dsl(text, source="p.yaml", line=3, col=7)
    message = str(info.value)
    assert message.startswith(where + ": "), message
    assert fragment in message


def test_every_error_is_listed_in_file_order() -> None:
    text = 'IF foo THEN route_to("a") WITH speed=1\nELSE IF language > 3 THEN route_to("b") WITH timeout=1'
    with pytest.raises(PolicyError) as info:
        compile_dsl(text, source="p.dsl")
    assert [(line, col) for line, col, _ in info.value.located] == [(1, 4), (1, 32), (2, 9), (2, 54)]


def test_term_lists_reach_conditions() -> None:
    (rule,) = compile_dsl('IF contains_legal(prompt) THEN route_to("law")', term_lists={"legal": ["NDA"]})
    assert rule.condition is not None and rule.condition.evaluate(view(prompt="sign this nda"))


def test_oversized_condition_in_a_clause() -> None:
    text = "IF " + " || ".join(["true"] * 2600) + ' THEN route_to("m")'
    with pytest.raises(PolicyError, match="the limit is 10,000"):
        compile_dsl(text)
