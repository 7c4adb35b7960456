"""Leftovers of the audit of docs/policies.md: what a policy file wrote that would be silently not done.

A test case's ``language: chinese`` was taken (the analyser never gives it: the case tested a
request that cannot happen); ``intent in []`` and ``contains_x(prompt)`` over an empty ``x`` compiled
to rules that never fire; a file without rules read ``1:1: <root>: Value error, ...``.
"""

from __future__ import annotations

from typing import Any

import pytest

from router_core.errors import PolicyError
from router_core.rules.cases import run_cases
from router_core.rules.load import compile_policy
from schemas.config import RouteLensConfig


def config(**routing: Any) -> RouteLensConfig:
    return RouteLensConfig.model_validate({"fleet": {"instances": [
        {"id": "a", "model": "big", "url": "http://127.0.0.1:9000"},
        {"id": "b", "model": "small", "url": "http://127.0.0.1:9001"}]}, "routing": routing})


FLEET = config()


def errors(text: str, source: str = "p.yaml", fleet: RouteLensConfig = FLEET) -> str:
    with pytest.raises(PolicyError) as info:
        compile_policy(text, source, fleet)
    return str(info.value)


def at(text: str, line: int, needle: str) -> str:
    """``LINE:COL`` of ``needle``'s first character on ``line``."""
    return f"{line}:{text.splitlines()[line - 1].index(needle) + 1}"


RULE = "routing_matrix:\n  - rule_name: zh\n    condition: 'language == \"zh\"'\n    primary_target: big\n"


@pytest.mark.parametrize("word", ["chinese", "ZH", "english", "cn"])
def test_a_case_language_the_analyser_never_gives_is_refused_at_it(word: str) -> None:
    text = RULE + f"tests:\n  - name: c\n    request: {{input_length: 5, language: {word}}}\n    expect: {{rule: zh}}\n"
    assert errors(text) == (f"p.yaml:{at(text, 7, word)}: tests[0].request.language: "
                            "Input should be 'zh', 'en', 'mixed' or 'unknown'")


def test_the_analysers_languages_are_taken_and_matched_as_written() -> None:
    cases = "".join(f"  - name: {w}\n    request: {{language: {w}}}\n"
                    f"    expect: {{rule: {'zh' if w == 'zh' else 'null'}}}\n"
                    for w in ("zh", "en", "mixed", "unknown"))
    results = run_cases(compile_policy(RULE + "tests:\n" + cases, "p.yaml", FLEET))
    assert [(r.case.name, r.rule, r.passed) for r in results] == [
        ("zh", "zh", True), ("en", None, True), ("mixed", None, True), ("unknown", None, True)]


@pytest.mark.parametrize(("condition", "needle", "message"), [
    ("intent in []", "[]", "intent in [] never holds: the list is empty"),
    ("input_length not in []", "[]", "input_length not in [] always holds: the list is empty"),
    ("file_type in [ ] || intent == 'x'", "[ ]", "file_type in [] never holds: the list is empty"),
    ("metadata.tier in []", "[]", "metadata.tier in [] never holds: the list is empty"),
], ids=["in", "not-in", "spaced-in-an-or", "metadata"])
def test_membership_of_an_empty_list_is_refused_at_the_list(condition: str, needle: str, message: str) -> None:
    text = f"routing_matrix:\n  - rule_name: a\n    condition: \"{condition}\"\n"
    assert errors(text) == f"p.yaml:{at(text, 3, needle)}: {message}"


def test_membership_of_an_empty_list_is_refused_in_the_dsl_too() -> None:
    text = 'IF input_length > 3 AND intent in [] THEN route_to("big")\n'
    assert errors(text, "p.dsl") == f"p.dsl:{at(text, 1, '[]')}: intent in [] never holds: the list is empty"


@pytest.mark.parametrize(("lists", "name"), [("{legal: []}", "legal"), ("{legal: ['', '  ']}", "legal")],
                         ids=["empty", "only-blanks"])
def test_a_term_function_over_a_list_without_terms_is_refused_at_the_call(lists: str, name: str) -> None:
    text = ("routing_matrix:\n  - rule_name: a\n    condition: \"input_length > 5 || contains_legal(prompt)\"\n"
            f"term_lists: {lists}\n")
    assert errors(text) == (f"p.yaml:{at(text, 3, 'contains_legal')}: contains_legal(prompt) never holds: "
                            f"the term list {name!r} has no terms")


def test_a_config_term_list_without_terms_is_refused_where_a_policy_calls_it() -> None:
    text = 'routing_dsl: |\n  IF contains_billing(prompt)\n    THEN route_to("big")\n'
    assert errors(text, fleet=config(term_lists={"billing": []})) == (
        f"p.yaml:{at(text, 2, 'contains_billing')}: contains_billing(prompt) never holds: the term list "
        "'billing' has no terms")


def test_an_unused_empty_term_list_and_one_with_terms_still_compile() -> None:
    text = ("routing_matrix:\n  - rule_name: a\n    condition: \"contains_legal(prompt) && intent in ['x']\"\n"
            "    primary_target: big\nterm_lists: {legal: ['', 'nda'], spare: []}\n"
            "tests:\n  - name: nda\n    request: {prompt: 'an NDA', intent: x}\n    expect: {rule: a, target: big}\n")
    assert [r.passed for r in run_cases(compile_policy(text, "p.yaml", FLEET))] == [True]


@pytest.mark.parametrize("text", ["tests: []\n", "# a policy, not yet written\n\ntimezone: UTC\n"],
                         ids=["tests", "comment-first"])  # written but empty: at its value (test_cli_audit_load)
def test_a_file_without_rules_is_refused_at_its_first_line_in_plain_words(text: str) -> None:
    assert errors(text) == "p.yaml:1:1: a policy file needs routing_matrix or routing_dsl"


def test_a_models_own_check_has_no_pydantic_prefix() -> None:
    text = "routing_matrix:\n  - rule_name: a\n    resource_guarantee: {}\ndegraded_targets:\n  x: {}\n"
    assert errors(text).splitlines() == [
        f"p.yaml:{at(text, 3, '{}')}: routing_matrix[0].resource_guarantee: resource_guarantee needs min_gpu_mem "
        "or reserved_cores",
        f"p.yaml:{at(text, 5, '{}')}: degraded_targets.x: a degraded target has exactly one of url and canned",
    ]
