"""The query corpus, the classifier and the token estimate the instances rely on."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from sim.corpus import (
    ANSWERS,
    CLASSES,
    FOLLOW_UPS,
    QUERIES,
    classify,
    compose_answer,
    detect_lang,
    estimate_tokens,
    grade,
    ground_truth,
    session_text,
    topic_of,
    truncate_tokens,
)


def test_every_class_has_enough_queries_in_both_languages():
    per_class = Counter(q.cls for q in QUERIES)
    assert set(per_class) == set(CLASSES) and min(per_class.values()) >= 5
    assert {(q.cls, q.lang) for q in QUERIES} == {(c, lang) for c in CLASSES for lang in ("zh", "en")}
    assert any("紧急" in q.text for q in QUERIES if q.cls == "ticket")
    longest_other = max(estimate_tokens(q.text) for q in QUERIES if q.cls != "contract")
    assert min(estimate_tokens(q.text) for q in QUERIES if q.cls == "contract") > 4 * longest_other


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q.cls}-{q.lang}-{QUERIES.index(q)}")
def test_corpus_queries_classify_to_their_own_class_and_language(query):
    assert classify(query.text) == query.cls
    assert detect_lang(query.text) == query.lang


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("abcd", 1), ("abcde", 2), ("合同", 2), ("合同ab", 3),
                                              ("，。", 2)])
def test_estimate_tokens(text, tokens):
    assert estimate_tokens(text) == tokens


def test_truncate_tokens_never_exceeds_the_limit():
    text = "合同 clause 条款 liability " * 20
    for limit in range(0, 40):
        cut = truncate_tokens(text, limit)
        assert estimate_tokens(cut) <= limit and text.startswith(cut)
    assert truncate_tokens("short", 100) == "short"


@pytest.mark.parametrize("cls", CLASSES)
def test_compose_answer_is_on_topic_deterministic_and_bounded(cls):
    prompt = next(q.text for q in QUERIES if q.cls == cls and q.lang == "en")
    first = compose_answer(prompt, random.Random(1), 10_000)
    assert compose_answer(prompt, random.Random(1), 10_000) == first
    assert first.finish_reason == "stop"
    assert any(fragment in first.text for fragment in ANSWERS[cls]["en"])
    assert "".join(piece for piece, _ in first.pieces) == first.text
    short = compose_answer(prompt, random.Random(1), 3)
    assert short.tokens <= 3 and short.finish_reason == "length" and first.text.startswith(short.text)


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"{q.cls}-{q.lang}-{QUERIES.index(q)}")
def test_answers_grade_as_their_verdict_for_every_query(query):
    for seed in range(5):
        assert grade(query, compose_answer(query.text, random.Random(seed), 10_000, "correct").text) == "correct"
        assert grade(query, compose_answer(query.text, random.Random(seed), 10_000, "wrong").text) == "wrong"
        assert grade(query, compose_answer(query.text, random.Random(seed), 10_000, "drift").text) == "off-topic"


def test_every_query_has_distinct_facts_that_no_filler_contains():
    fillers = [f for langs in ANSWERS.values() for frags in langs.values() for f in frags]
    for query in QUERIES:
        assert query.fact and query.wrong and query.fact != query.wrong
        assert not any(query.fact in f or query.wrong in f for f in fillers)


def test_ground_truth_survives_session_prefixes_and_follow_ups():
    query = next(q for q in QUERIES if q.cls == "ticket" and q.lang == "zh")
    prefixed = session_text(query, "T-000042")
    assert prefixed.startswith("[工单 T-000042] ") and ground_truth(prefixed) == query
    assert ground_truth("  " + query.text.upper() + " ") == query and ground_truth("something else") is None
    assert topic_of([prefixed, FOLLOW_UPS["zh"][0]]) == prefixed
    assert topic_of(["hello", "there"]) == "there"
