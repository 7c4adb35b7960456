"""The rule index: guards derived from conditions, and a match identical to trying every rule in order."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router_core.rules.condition import compile_condition
from router_core.rules.ir import ClauseVerdict, Match, Origin, Rule, RuleSet
from router_core.rules.request import RequestView

TERMS = {"legal_terms": ["contract", "诉讼"]}


def guards(text: str) -> list[tuple[str, str, tuple[Any, ...]]] | None:
    g = compile_condition(text, term_lists=TERMS).guards
    return None if g is None else [(x.feature, x.op, x.consts) for x in g]


@pytest.mark.parametrize(("text", "expected"), [
    ("input_length > 8000", [("input_length", ">", (8000,))]),
    ("8000 < input_length", [("input_length", ">", (8000,))]),
    ("language == 'zh' && request_time.hour in [1, 2]", [("language", "in", ("zh",))]),
    ("input_length > 5 && prompt_contains('x')", [("input_length", ">", (5,))]),
    ("input_length > 5 || metadata.tier == 'gold'", [("input_length", ">", (5,)), ("metadata.tier", "in", ("gold",))]),
    ("has_attachments", [("has_attachments", "in", (True,))]),
    ("(language == 'en') && !(intent == 'x')", [("language", "in", ("en",))]),
    ("input_length > 5 || prompt_contains('x')", None),
    ("!(language == 'zh')", None),
    ("language != 'zh'", None),
    ("intent == null", None),
    ("language not in ['zh']", None),
    ("contains_legal_terms(prompt)", None),
    ("input_length > query_length", None),
])
def test_guards(text: str, expected: list[tuple[str, str, tuple[Any, ...]]] | None) -> None:
    assert guards(text) == expected


def reference(rules: RuleSet, req: RequestView) -> Match:
    """Every rule in order, the first that holds wins (the match before the index); why each before it failed."""
    def missed(upto: int) -> tuple[ClauseVerdict, ...]:
        return tuple(ClauseVerdict(r.name, False, r.condition.why_not(req)) for r in rules.rules[:upto]
                     if r.condition is not None)

    for i, rule in enumerate(rules.rules):
        if rule.condition is None or rule.condition.evaluate(req):
            detail = [] if rule.condition is None else rule.condition.explain(req)
            return Match(rule, (*missed(i), ClauseVerdict(rule.name, True, detail)))
    return Match(None, missed(len(rules.rules)))


# Small domains, so requests sit on the rules' boundaries (value == constant) and every type oddity meets them.
FEATURES = ["input_length", "intent_confidence", "metadata.n", "metadata.a.b"]
STRINGS = ["intent", "header('x-a')", "metadata.n"]
# language is one of the analyser's four (any other literal is a policy error): its own words
LANGUAGE, LANGUAGES = "language", ["'zh'", "'en'", "'mixed'"]
NUMBERS = ["0", "1", "2", "8000"]
# The hour with hours every comparison can hold and fail for (an hour out of 0-23, or `< 0`, is a policy error)
HOUR, HOURS = "request_time.hour", ["1", "2", "12"]
WORDS = ["'zh'", "'gold'", "'1'"]
ATOMS = st.one_of(
    st.builds("{} {} {}".format, st.sampled_from(FEATURES), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
              st.sampled_from(NUMBERS)),
    st.builds("{} {} {}".format, st.sampled_from(NUMBERS), st.sampled_from(["<", ">="]), st.sampled_from(FEATURES)),
    st.builds("{} {} {}".format, st.just(HOUR), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
              st.sampled_from(HOURS)),
    st.builds("{} {} {}".format, st.sampled_from(HOURS), st.sampled_from(["<", ">="]), st.just(HOUR)),
    st.builds("{} in [{}]".format, st.just(HOUR),  # not [], which is refused: it never holds
              st.lists(st.sampled_from(HOURS), min_size=1, max_size=3).map(",".join)),
    st.builds("{} {} {}".format, st.sampled_from(STRINGS), st.sampled_from(["==", "!="]), st.sampled_from(WORDS)),
    st.builds("{} in [{}]".format, st.sampled_from(STRINGS),
              st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(",".join)),
    st.builds("{} {} {}".format, st.just(LANGUAGE), st.sampled_from(["==", "!="]), st.sampled_from(LANGUAGES)),
    st.builds("{} in [{}]".format, st.just(LANGUAGE),
              st.lists(st.sampled_from(LANGUAGES), min_size=1, max_size=3).map(",".join)),
    st.builds("{} in [{}]".format, st.sampled_from(FEATURES),
              st.lists(st.sampled_from(NUMBERS), min_size=1, max_size=3).map(",".join)),
    st.builds("{} not in [{}]".format, st.sampled_from(STRINGS), st.sampled_from(WORDS)),
    st.sampled_from(["has_attachments", "metadata.n", "prompt_contains('紧急')", "contains_legal_terms(prompt)",
                     "intent == null", "input_length > intent_confidence", "true", "false"]),
)
CONDITIONS = st.recursive(ATOMS, lambda inner: st.one_of(
    st.builds("{} && {}".format, inner, inner), st.builds("{} || {}".format, inner, inner),
    inner.map("!({})".format), inner.map("({})".format)), max_leaves=5)
META_VALUES = st.one_of(st.none(), st.booleans(), st.integers(0, 2), st.sampled_from([2.0, -0.0, float("nan")]),
                        st.sampled_from(["gold", "zh", "1"]), st.lists(st.integers(0, 2), max_size=2),
                        st.dictionaries(st.sampled_from(["b"]), st.integers(0, 2), max_size=1))
REQUESTS = st.builds(
    RequestView,
    input_length=st.sampled_from([0, 1, 2, 8000]),
    query_length=st.just(1),
    language=st.sampled_from(["zh", "en"]),
    intent=st.sampled_from([None, "zh", "gold"]),
    intent_confidence=st.sampled_from([None, 0.0, 1.0, 2.0]),
    file_types=st.just(()),
    has_attachments=st.booleans(),
    request_time=st.sampled_from([datetime(2024, 5, 6, h, tzinfo=UTC) for h in (0, 1, 2)]),
    headers=st.sampled_from([{}, {"x-a": "zh"}, {"x-a": "gold"}]),
    metadata=st.dictionaries(st.sampled_from(["n", "a"]), META_VALUES, max_size=2),
    prompt=st.sampled_from(["", "紧急 contract"]),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(CONDITIONS, st.none()), min_size=1, max_size=12), st.lists(REQUESTS, min_size=1, max_size=6))
def test_indexed_match_is_every_rule_in_order(conditions: list[str | None], requests: list[RequestView]) -> None:
    rules = RuleSet(tuple(Rule(f"r{i}", Origin("p.yaml", i + 1),
                               None if c is None else compile_condition(c, term_lists=TERMS))
                          for i, c in enumerate(conditions)), "p.yaml")
    for req in requests:
        got, want = rules.match(req), reference(rules, req)
        assert got.rule is want.rule and got.tried == want.tried
        assert rules.match(req, explain="all").rule is want.rule


def test_fifty_rules_evaluate_only_their_candidates() -> None:
    """The bench's matrix: a request none of the 49 threshold-or-tier rules can match tries none of their closures."""
    conds = [compile_condition(f"input_length > {20_000 + i} && prompt_contains('kw{i}') || metadata.tier == 't{i}'")
             for i in range(49)] + [compile_condition("language == 'zh' && request_time.hour in [1,2,3]")]
    rules = RuleSet(tuple(Rule(f"r{i}", Origin("p.yaml", i + 1), c) for i, c in enumerate(conds)), "p.yaml")
    req = RequestView(input_length=100, query_length=100, language="en", intent=None, intent_confidence=None,
                      file_types=(), has_attachments=False, request_time=datetime(2024, 5, 6, 2, tzinfo=UTC),
                      metadata={"tier": "t7"})
    assert rules._index.candidates(req) == 1 << 7
    m = rules.match(req)
    assert m.rule is rules.rules[7] and [t.matched for t in m.tried] == [False] * 7 + [True]


@pytest.mark.parametrize("condition", [
    "metadata.n > 0", "metadata.n >= 1", "metadata.n < 1", "metadata.n <= 0", "metadata.n == 1", "metadata.n in [0, 1]",
    "metadata.n == 'x'", "metadata.n", "0 < metadata.n", "metadata.n == 0",
])
@pytest.mark.parametrize("value", [True, False, 0, 1, 1.0, -0.0, float("nan"), "1", "x", [1], {"a": 1}, None])
def test_odd_metadata_values_match_as_the_closures_say(condition: str, value: Any) -> None:
    rules = RuleSet((Rule("first", Origin("p.yaml", 1), compile_condition(condition)),
                     Rule("else", Origin("p.yaml", 2))), "p.yaml")
    req = RequestView(input_length=1, query_length=1, language="en", intent=None, intent_confidence=None,
                      file_types=(), has_attachments=False, request_time=datetime(2024, 5, 6, 2, tzinfo=UTC),
                      metadata={"n": value})
    got, want = rules.match(req), reference(rules, req)
    assert got.rule is want.rule and got.tried == want.tried
