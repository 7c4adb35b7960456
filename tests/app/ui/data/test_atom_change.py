"""A rule's failing-atom line read back: the change it names turns the atom, checked against the real compiler."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from app.ui.data.atom_change import atom_change
from router_core.rules.condition import compile_condition
from tests.router_core.rules.test_why_not import view

# (condition that fails on the request, the feature to set, the value the change names is parsed to)
TURNS = [
    ("request_time.hour in [9, 11, 14, 16]", "request_time.hour", 16),
    ("input_length > 8000", "input_length", 8001),
    ("input_length >= 8000", "input_length", 8000),
    ("query_length < 10", "query_length", 9),
    ("query_length <= 10", "query_length", 10),
    ("language == 'zh'", "language", "zh"),
    ("intent in ['legal', 'code']", "intent", "legal"),
    ("file_type in ['pdf']", "file_type", "pdf"),
    # the router stores these values as <withheld: 6 chars, sha256:…> (rules/condition/disclose.py)
    ("metadata.tier == 'gold'", "metadata.tier", "gold"),
    ("header('X-Tier') == 'gold'", "header('x-tier')", "gold"),
    ("has_attachments == false", "has_attachments", False),
    ("!has_attachments", "has_attachments", False),
]


def changed(feature: str, value: Any) -> Any:
    req = view()
    if feature == "request_time.hour":
        return replace(req, request_time=req.request_time.replace(hour=value))
    if feature == "file_type":
        return replace(req, file_types=(value,))
    if feature.startswith("metadata."):
        return replace(req, metadata={**req.metadata, feature.split(".", 1)[1]: value})
    if feature.startswith("header("):
        return replace(req, headers={**req.headers, "x-tier": value})
    return replace(req, **{feature: value})


@pytest.mark.parametrize(("condition", "feature", "value"), TURNS, ids=[t[0] for t in TURNS])
def test_the_named_change_turns_the_atom(condition: str, feature: str, value: Any) -> None:
    cond = compile_condition(condition)
    assert not cond.evaluate(view())
    (line,) = cond.why_not(view())
    change = atom_change(line)
    assert change is not None and change.feature == feature and 0 < change.size <= 1
    assert json.loads(change.new) == value
    assert cond.evaluate(changed(feature, json.loads(change.new))), (line, change)
    assert change.says == f"had {feature} been {change.new}"


@pytest.mark.parametrize(("line", "new", "size"), [
    ("request_time.hour = 17 not in [9, 11, 14, 16]", "16", 1 / 24),
    ("request_time.weekday = 0 < 5", "5", 5 / 7),
    ("input_length = 500 <= 8000", "8001", 7501 / 8001),
    ("intent_confidence = 0.4 <= 0.5", "above 0.5", 0.1),  # small numbers: the change itself (scale at least 1)
    ('language = "en" != "zh"', '"zh"', 1.0),
    ('language = "zh" == "zh"', 'anything but "zh"', 1.0),
    ('file_type = "docx" in ["docx"]', 'a value not in ["docx"]', 1.0),
    ("keyword_score = null (not > 0.5)", "above 0.5", 1.0),
    ('metadata.tier = "silver" (not > 3)', "4", 1.0),
    ('metadata.vip = "yes", not true', "true", 1.0),
    ("header('authorization') = <redacted>, not null", "null", 1.0),
    ("metadata.org.region = null", "set (not null)", 1.0),
    ('intent = "with spaces, and a \\"quote\\"" != "legal"', '"legal"', 1.0),
])
def test_each_line_the_router_writes(line: str, new: str, size: float) -> None:
    change = atom_change(line)
    assert change is not None and change.new == new and change.size == pytest.approx(size)


def test_prompt_lines_name_the_pattern_never_a_value() -> None:
    change = atom_change("prompt_contains('紧急') did not match")
    assert change is not None and change.says == "had the prompt matched prompt_contains('紧急')"
    held = atom_change("contains_legal_terms(prompt) matched")
    assert held is not None and held.new == "not matched contains_legal_terms(prompt)"


def test_lines_it_cannot_read() -> None:
    for line in ["(other atoms failed too)", 'intent = "cut at sixty charac...', "", "x = 1 ~ 2"]:
        assert atom_change(line) is None, line
    generic = atom_change("query_length > input_length is false (query_length = 40, input_length = 500)")
    assert generic is not None and generic.says == "had query_length > input_length been true"
