"""Why a rule did not match: the first atom that failed it, with the value it read, for every atom kind."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from router_core.rules.condition import compile_condition
from router_core.rules.condition.why_not import MORE, Node
from router_core.rules.dsl import compile_dsl
from router_core.rules.ir import RuleSet
from router_core.rules.load import compile_policy
from router_core.rules.request import RequestView
from schemas.config import RouteLensConfig
from tests.router_core.rules.test_index import CONDITIONS, REQUESTS, TERMS

PROMPT = "紧急!! my password is hunter2, see the contract"
CONFIG = RouteLensConfig.model_validate({"fleet": {"instances": [
    {"id": "a-1", "model": "a", "url": "http://127.0.0.1:9"}]}})


def view(**kw: Any) -> RequestView:
    base: dict[str, Any] = dict(
        input_length=500, query_length=40, language="en", intent="chat", intent_confidence=0.4, file_types=("docx",),
        has_attachments=True, request_time=datetime(2026, 6, 1, 17, 5, tzinfo=UTC), headers={"x-tier": "free",
        "authorization": "Bearer sk-secret"}, metadata={"tier": "silver", "vip": "yes"}, prompt=PROMPT,
        keyword_score=None,
    )
    base.update(kw)
    return RequestView(**base)


# (id, condition, the line: the fact that held instead, with the value read[, the request's changes])
KINDS = [
    ("hour", "request_time.hour in [9, 11, 14, 16]", "request_time.hour = 17 not in [9, 11, 14, 16]"),
    ("weekday", "request_time.weekday >= 5", "request_time.weekday = 0 < 5"),
    ("language", "language == 'zh'", 'language = "en" != "zh"'),
    ("length", "input_length > 8000", "input_length = 500 <= 8000"),
    ("length-mirrored", "8000 < input_length", "input_length = 500 <= 8000"),
    ("query-length", "query_length >= 1024", "query_length = 40 < 1024"),
    ("intent", "intent in ['legal', 'code']", 'intent = "chat" not in ["legal", "code"]'),
    ("intent-null", "intent == 'legal'", 'intent = null != "legal"', {"intent": None}),
    ("confidence", "intent_confidence > 0.5", "intent_confidence = 0.4 <= 0.5"),
    # a header or metadata value is the caller's: its size and fingerprint, unless the condition names it
    ("header", "header('X-Tier') == 'gold'", "header('x-tier') = <withheld: 4 chars, sha256:ad95d5fa> != \"gold\""),
    ("secret-header", "header('Authorization') == null", "header('authorization') = <redacted>, not null"),
    ("metadata", "metadata.tier == 'gold'", 'metadata.tier = <withheld: 6 chars, sha256:78cde64c> != "gold"'),
    ("metadata-absent", "metadata.org.region != null", "metadata.org.region = null"),
    ("metadata-bare", "metadata.vip", 'metadata.vip = <withheld: 3 chars, sha256:8a798890>, not true'),
    ("metadata-ordering", "metadata.tier > 3", 'metadata.tier = <withheld: 6 chars, sha256:78cde64c> (not > 3)'),
    ("file-type", "file_type in ['pdf', 'png']", 'file_type = "docx" not in ["pdf", "png"]'),
    ("file-type-not-in", "file_type not in ['docx']", 'file_type = "docx" in ["docx"]'),
    ("no-attachments", "!has_attachments", "has_attachments = true"),
    ("keyword-score-null", "keyword_score > 0.5", "keyword_score = null (not > 0.5)"),
    ("prompt", "prompt_contains('urgent')", "prompt_contains('urgent') did not match"),
    ("prompt-negated", "!prompt_contains('password')", "prompt_contains('password') matched"),
    ("term-list", "contains_legal_terms(prompt) == false", "contains_legal_terms(prompt) == false is false"),
    ("two-features", "query_length > input_length", "query_length > input_length is false "
                                                    "(query_length = 40, input_length = 500)"),
]
TERM_LISTS = {"legal_terms": ["contract"]}


def _rule_sets(condition: str) -> dict[str, RuleSet]:
    """The condition as a YAML matrix entry and as a DSL clause, each followed by an ELSE."""
    matrix = {"routing_matrix": [{"rule_name": "r", "condition": condition, "primary_target": "a"},
                                 {"rule_name": "else", "primary_target": "a"}],
              "term_lists": TERM_LISTS}
    dsl = f'IF {condition} THEN route_to("a") ELSE route_to("a")'
    return {"matrix": compile_policy(json.dumps(matrix), "p.yaml", CONFIG),
            "dsl": RuleSet(compile_dsl(dsl, source="p.dsl", term_lists=TERM_LISTS), "p.dsl")}


@pytest.mark.parametrize("kind", KINDS, ids=[k[0] for k in KINDS])
def test_the_rule_names_the_atom_and_the_value_it_read(kind: tuple[Any, ...]) -> None:
    condition, line, changes = kind[1], kind[2], (kind[3] if len(kind) > 3 else {})
    for form, rules in _rule_sets(condition).items():
        for explain in ("matched", "all"):
            m = rules.match(view(**changes), explain=explain)  # type: ignore[arg-type]
            first = m.tried[0]
            assert (first.matched, first.detail) == (False, [line]), (form, explain)
            assert m.tried[1].matched and m.rule is not None and m.rule.name != "r"
            assert not any("hunter2" in d or "password is" in d for t in m.tried for d in t.detail)


def test_the_readme_urgent_ticket_says_why_it_went_elsewhere() -> None:
    rules = _rule_sets("prompt_contains('紧急') && request_time.hour in [9,11,14,16]")["matrix"]
    assert rules.match(view()).tried[0].detail == ["request_time.hour = 17 not in [9, 11, 14, 16]"]
    at_nine = view(request_time=datetime(2026, 6, 1, 9, tzinfo=UTC), prompt="nothing to see")
    assert rules.match(at_nine).tried[0].detail == ["prompt_contains('紧急') did not match"]


@pytest.mark.parametrize(("condition", "first", "every"), [
    ("input_length > 8000 && language == 'en'", "input_length = 500 <= 8000", 1),  # alone: en holds
    ("input_length > 8000 && language == 'zh'", "input_length = 500 <= 8000", 2),
    ("input_length > 8000 || language == 'zh'", "input_length = 500 <= 8000", 2),  # an || needs one side
    ("(input_length > 8000 || language == 'en') && intent == 'code'", 'intent = "chat" != "code"', 1),
    ("!(language == 'en' && input_length < 9000)", 'language = "en" == "en"', 2),
    ("!(language == 'en' || intent == 'code')", 'language = "en" == "en"', 1),
])
def test_first_atom_and_whether_it_failed_alone(condition: str, first: str, every: int) -> None:
    cond = compile_condition(condition)
    req = view()
    assert not cond.evaluate(req)
    lines = cond.why_not(req, every=True)
    assert lines[0] == first and len(lines) == every
    assert cond.why_not(req) == ([first] if every == 1 else [first, MORE])


def _flipped(node: Node, req: RequestView, atom: int) -> bool:
    """The node's verdict with one atom's turned."""
    if node.kind == "atom":
        return node.pred(req) != (node.atom == atom)
    if node.kind == "not":
        return not _flipped(node.children[0], req, atom)
    sides = [_flipped(c, req, atom) for c in node.children]
    return all(sides) if node.kind == "and" else any(sides)


def _atoms(node: Node) -> list[int]:
    return [node.atom] if node.kind == "atom" else [a for c in node.children for a in _atoms(c)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CONDITIONS, REQUESTS)
def test_one_line_means_that_atom_alone_turns_the_verdict(text: str, req: RequestView) -> None:
    cond = compile_condition(text, term_lists=TERMS)
    if cond.evaluate(req):
        return
    every, quick = cond.why_not(req, every=True), cond.why_not(req)
    assert every and quick[0] == every[0] and (len(quick) == 1) == (len(every) == 1)
    assert quick[1:] in ([], [MORE])
    flips = [a for a in _atoms(cond.tree) if _flipped(cond.tree, req, a)]
    if len(every) == 1:
        assert flips, "the one atom blamed turns the verdict alone"
    assert not any("contract" in line or "紧急 " in line for line in every)  # the prompt is "紧急 contract"
