"""The condition language: seed conditions, every operator and feature, explanations, located errors."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from router_core.errors import PolicyError
from router_core.rules.condition import CompiledCondition, compile_condition
from router_core.rules.request import RequestView

TZ = timezone(timedelta(hours=8))
LEGAL = {"legal_terms": ["Contract", "诉讼", "NDA"]}
LONG_OR_LEGAL = "input_length > 8000 || contains_legal_terms(prompt)"
URGENT = "prompt_contains('紧急') && request_time.hour in [9,11,14,16]"


def view(**kw: Any) -> RequestView:
    base: dict[str, Any] = dict(
        input_length=120, query_length=40, language="en", intent=None, intent_confidence=None, file_types=(),
        has_attachments=False, request_time=datetime(2024, 5, 6, 10, 30, tzinfo=TZ),  # a Monday
        headers={}, metadata={}, prompt="hello", keyword_score=None,
    )
    base.update(kw)
    return RequestView(**base)


def at(hour: int, day: int = 6) -> datetime:
    return datetime(2024, 5, day, hour, 5, tzinfo=TZ)


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    req: RequestView
    expected: bool


SEED_CASES = [
    Case("long-context", LONG_OR_LEGAL, view(input_length=8001), True),
    Case("at-8000-not-long", LONG_OR_LEGAL, view(input_length=8000), False),
    Case("legal-term-any-case", LONG_OR_LEGAL, view(prompt="please review this CONTRACT"), True),
    Case("legal-term-zh", LONG_OR_LEGAL, view(prompt="关于诉讼的问题"), True),
    Case("neither", LONG_OR_LEGAL, view(prompt="write a poem"), False),
    *(Case(f"urgent-at-{h}", URGENT, view(prompt="紧急：服务器宕机", request_time=at(h)), True)
      for h in (9, 11, 14, 16)),
    *(Case(f"urgent-not-at-{h}", URGENT, view(prompt="紧急：服务器宕机", request_time=at(h)), False)
      for h in (0, 8, 10, 12, 15, 17, 23)),
    Case("not-urgent-at-9", URGENT, view(prompt="普通问题", request_time=at(9)), False),
]


@pytest.mark.parametrize("case", SEED_CASES, ids=lambda c: c.id)
def test_seed_conditions(case: Case) -> None:
    assert compile_condition(case.text, term_lists=LEGAL).evaluate(case.req) is case.expected


R = view(input_length=5000, query_length=900, language="zh", intent="legal", intent_confidence=0.82,
         file_types=("pdf", "png"), has_attachments=True, request_time=at(14, day=11),  # a Saturday
         headers={"x-tenant": "acme", "authorization": "Bearer s3cret"},
         metadata={"tier": "gold", "quota": 7, "org": {"region": "eu"}, "beta": True}, keyword_score=0.4)

OPERATOR_CASES = [
    ("eq", 'intent == "legal"', True), ("ne", 'intent != "legal"', False),
    ("lt", "input_length < 5000", False), ("le", "input_length <= 5000", True),
    ("gt", "query_length > 899", True), ("ge", "query_length >= 901", False),
    ("literal-left", "8000 > input_length", True), ("float", "intent_confidence >= 0.8", True),
    ("negative", "keyword_score > -1", True), ("exponent", "input_length < 1e4", True),
    ("in", 'language in ["zh", "mixed"]', True), ("not-in", 'language not in ["zh", "mixed"]', False),
    ("NOT-IN-upper", 'language NOT IN ["en"]', True),
    ("and-symbol", 'has_attachments && file_type == "pdf"', True), ("and-word", "has_attachments and false", False),
    ("AND-upper", "has_attachments AND true", True), ("or-symbol", "false || has_attachments", True),
    ("Or-mixed-case", "false Or false", False), ("not-symbol", "!has_attachments", False),
    ("not-word", "NOT has_attachments", False), ("not-paren", "!(input_length > 9000)", True),
    ("precedence", "true || false && false", True), ("parens", "(true || false) && false", False),
    ("double-quote-escape", r'"a\"b" == "a\"b"', True), ("single-quote-escape", "'it\\'s' == \"it's\"", True),
    ("unicode-escape", r"'\u00e9' == 'é'", True), ("bare-true", "true", True),
    ("hour", "request_time.hour == 14", True), ("weekday", "request_time.weekday == 5", True),
    ("weekday-in", "request_time.weekday in [5, 6]", True), ("file-type-first", 'file_type == "png"', False),
    ("header-any-case", "header('X-Tenant') == 'acme'", True), ("header-missing", "header('x-none') == null", True),
    ("header-present", "header('x-tenant') != null", True),
    ("metadata", 'metadata.tier == "gold"', True), ("metadata-num", "metadata.quota > 5", True),
    ("metadata-path", 'metadata.org.region == "eu"', True), ("metadata-missing", "metadata.nope == null", True),
    ("metadata-missing-gt", "metadata.nope > 1", False), ("metadata-wrong-type", "metadata.tier > 3", False),
    ("metadata-bare", "metadata.beta", True), ("metadata-bare-not-bool", "metadata.quota", False),
    ("metadata-in", 'metadata.tier in ["gold", "platinum"]', True), ("keyword-score", "keyword_score < 0.5", True),
    ("feature-vs-feature", "query_length < input_length", True),
    ("prompt-contains-case", "prompt_contains('HELLO')", True), ("newlines", "has_attachments\n  &&\n  true", True),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in OPERATOR_CASES], ids=[c[0] for c in OPERATOR_CASES])
def test_operators_and_features(text: str, expected: bool) -> None:
    assert compile_condition(text).evaluate(replace(R, prompt="Hello there")) is expected


NULL_CASES = [  # intent, intent_confidence, keyword_score and file_type are None on this request
    ("eq-none-false", 'intent == "legal"', False), ("ne-none-false", 'intent != "legal"', False),
    ("gt-none-false", "intent_confidence > 0.5", False), ("lt-none-false", "keyword_score < 0.5", False),
    ("in-none-false", 'file_type in ["pdf"]', False), ("not-in-none-false", 'file_type not in ["pdf"]', False),
    ("eq-null", "intent == null", True), ("ne-null", "intent != null", False), ("null-left", "null == intent", True),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in NULL_CASES], ids=[c[0] for c in NULL_CASES])
def test_comparisons_with_none_are_false(text: str, expected: bool) -> None:
    assert compile_condition(text).evaluate(view()) is expected


def test_compiled_condition_shape() -> None:
    c = compile_condition(LONG_OR_LEGAL, term_lists=LEGAL)
    assert isinstance(c, CompiledCondition)
    assert c.text == LONG_OR_LEGAL
    assert c.features == {"input_length", "contains_legal_terms"}
    assert compile_condition("header('X-A') == 'b' && metadata.org.region == 'eu'").features == {
        "header", "metadata.org.region"}


EXPLAIN_CASES = [
    ("long", LONG_OR_LEGAL, view(prompt="NDA draft"),
     ["input_length > 8000: false (input_length=120)", "contains_legal_terms(prompt): true"]),
    ("urgent", URGENT, view(prompt="紧急", request_time=at(10)),
     ["prompt_contains('紧急'): true", "request_time.hour in [9,11,14,16]: false (request_time.hour=10)"]),
    ("none-and-metadata", 'intent == "legal" && metadata.tier != null', view(metadata={"tier": "gold"}),
     # a metadata value the condition does not name is stored as its size and fingerprint only
     ['intent == "legal": false (intent=null)',
      'metadata.tier != null: true (metadata.tier=<withheld: 4 chars, sha256:24d7f03d>)']),
    ("multiline-folded", "input_length >\n   10", view(), ["input_length > 10: true (input_length=120)"]),
    ("secret-header", "header('Authorization') != null", view(headers={"authorization": "Bearer x"}),
     ["header('Authorization') != null: true (header('authorization')=<redacted>)"]),
    ("two-features", "query_length < input_length", view(),
     ["query_length < input_length: true (query_length=40, input_length=120)"]),
]


@pytest.mark.parametrize(("text", "req", "lines"), [c[1:] for c in EXPLAIN_CASES], ids=[c[0] for c in EXPLAIN_CASES])
def test_explain(text: str, req: RequestView, lines: list[str]) -> None:
    assert compile_condition(text, term_lists=LEGAL).explain(req) == lines


def test_explain_never_shows_the_prompt() -> None:
    secret = "my password is hunter2 and the contract"
    lines = compile_condition(LONG_OR_LEGAL + " || prompt_contains('x')", term_lists=LEGAL).explain(view(prompt=secret))
    assert not any("hunter2" in line for line in lines)


ERROR_CASES = [  # (id, text, line, col, FILE:LINE:COL expected, message fragment)
    ("syntax", 'intent = "legal"', 1, 1, "p.yaml:1:8", "unexpected '='"),
    ("syntax-offset", 'intent = "legal"', 4, 15, "p.yaml:4:22", "use == to compare"),
    ("syntax-end", "input_length >", 2, 5, "p.yaml:2:19", "ends too early; expected a feature"),
    ("syntax-char", "true & false", 1, 1, "p.yaml:1:6", "use && or AND"),
    ("unterminated", "intent == 'legal", 1, 1, "p.yaml:1:11", "unterminated string"),
    ("empty", "   ", 3, 7, "p.yaml:3:7", "the condition is empty"),
    ("unknown-feature", "input_length > 1 && tokens > 3", 1, 1, "p.yaml:1:21", "unknown feature 'tokens'; known:"),
    ("unknown-function", "has_legal(prompt)", 1, 1, "p.yaml:1:1", "known: contains_legal_terms(prompt), header"),
    ("arity", "prompt_contains('a', 'b')", 1, 1, "p.yaml:1:1", "takes one argument"),
    ("term-list-arg", "contains_legal_terms(intent)", 1, 1, "p.yaml:1:22", "write contains_legal_terms(prompt)"),
    ("type-ordering", "language > 3", 1, 1, "p.yaml:1:1", "> compares numbers; language is a string"),
    ("type-bool-eq", 'has_attachments == "x"', 1, 1, "p.yaml:1:1", "never compare equal"),
    ("type-list", 'request_time.hour in ["a"]', 1, 1, "p.yaml:1:22", "the list holds a string"),
    ("mixed-list", "input_length in [1, 'a']", 1, 1, "p.yaml:1:17", "one type"),
    ("bare-string", "intent", 1, 1, "p.yaml:1:1", "not true/false"),
    ("null-order", "intent_confidence < null", 1, 1, "p.yaml:1:1", "null compares only with == or !="),
    ("bad-escape", r"intent == 'a\q'", 1, 1, "p.yaml:1:13", "unknown escape"),
    ("prompt-feature", "prompt == 'x'", 1, 1, "p.yaml:1:1", "the prompt is read only through"),
    ("multiline", 'intent == "legal"\n   && tokens > 1', 10, 20, "p.yaml:11:7", "unknown feature 'tokens'"),
    ("multiline-syntax", "has_attachments &&\n  (true ||)", 10, 20, "p.yaml:11:11", "unexpected ')'"),
    ("too-deep", "(" * 70 + "true" + ")" * 70, 1, 1, "p.yaml:1:66", "deeper than 64"),
    ("too-long", "true || " * 1300 + "true", 5, 3, "p.yaml:5:3", "the limit is 10,000"),
]


@pytest.mark.parametrize(("text", "line", "col", "where", "fragment"), [c[1:] for c in ERROR_CASES],
                         ids=[c[0] for c in ERROR_CASES])
def test_errors_are_located(text: str, line: int, col: int, where: str, fragment: str) -> None:
    with pytest.raises(PolicyError) as info:
        compile_condition(text, source="p.yaml", line=line, col=col, term_lists=LEGAL)
    message = str(info.value)
    assert message.startswith(where + ": "), message
    assert fragment in message


def test_every_error_is_listed() -> None:
    with pytest.raises(PolicyError) as info:
        compile_condition("foo > 1 || language > 3", source="p.yaml")
    assert [(line, col) for line, col, _ in info.value.located] == [(1, 1), (1, 12)]


def test_long_chains_are_flat_not_deep() -> None:
    c = compile_condition("||".join(["1>2"] * 1990 + ["has_attachments && true && true"]))
    assert c.evaluate(view(has_attachments=True)) is True
    assert len(c.explain(view())) == 1993


def test_errors_are_capped() -> None:
    with pytest.raises(PolicyError) as info:
        compile_condition(" || ".join(["nope"] * 50), source="p.yaml")
    assert len(info.value.located) == 21
    assert info.value.located[-1] == (1, 161, "and 30 more problems")


def test_a_megabyte_condition_fails_fast() -> None:
    text = "(" * 500_000 + "true" + ")" * 500_000
    start = time.perf_counter()  # a bound on work, not a clock the code reads
    with pytest.raises(PolicyError, match="the limit is 10,000"):
        compile_condition(text, source="p.yaml")
    assert time.perf_counter() - start < 0.5


def test_deep_nesting_within_the_length_limit() -> None:
    with pytest.raises(PolicyError, match="deeper than 64"):
        compile_condition("!" * 4000 + "true")
    assert compile_condition("!" * 64 + "true").evaluate(view()) is True
