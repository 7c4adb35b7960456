"""Whatever the text, compile_condition returns a condition or raises PolicyError; nothing else."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router_core.errors import PolicyError
from router_core.rules.condition import compile_condition
from router_core.rules.dsl import compile_dsl
from router_core.rules.request import RequestView

TERMS = {"legal_terms": ["contract", "诉讼"]}
REQ = RequestView(input_length=9000, query_length=10, language="zh", intent="legal", intent_confidence=0.5,
                  file_types=("pdf",), has_attachments=True, request_time=datetime(2024, 5, 6, 9, tzinfo=UTC),
                  headers={"x-a": "b"}, metadata={"tier": "gold", "n": [1]}, prompt="紧急 contract")

TOKENS = [
    "input_length", "query_length", "language", "intent", "intent_confidence", "file_type", "has_attachments",
    "keyword_score", "request_time.hour", "request_time.weekday", "metadata.tier", "metadata.n", "metadata",
    "header('x-a')", "header", "prompt_contains('紧急')", "prompt_contains", "contains_legal_terms(prompt)",
    "contains_legal_terms", "prompt", "unknown", "(", ")", "[", "]", ",", ".", "==", "!=", "<", "<=", ">", ">=",
    "=", "in", "not", "NOT", "!", "&&", "||", "AND", "or", "&", "true", "false", "null", "0", "-1", "8000", "0.5",
    "1e999", "'a'", '"zh"', "'\\q'", "'", '"', "#", "\n", " ", "IF", "THEN", "ELSE", "route_to", "WITH",
]
token_text = st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)
OPERANDS = st.sampled_from([t for t in TOKENS[:20] if t not in ("metadata", "header", "prompt_contains", "prompt")]
                           + ["0", "-1", "8000", "0.5", "'a'", '"zh"', "true", "null"])
ATOMS = st.one_of(
    st.tuples(OPERANDS, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), OPERANDS).map(" ".join),
    st.tuples(OPERANDS, st.sampled_from(["in", "not in"]), st.lists(OPERANDS, max_size=3).map(", ".join))
    .map(lambda t: f"{t[0]} {t[1]} [{t[2]}]"),
    OPERANDS,
)
grammatical = st.recursive(ATOMS, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from([" && ", " || ", " AND ", " or "]), inner).map("".join),
    inner.map(lambda t: f"!({t})"), inner.map(lambda t: f"({t})")), max_leaves=30)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(text: str) -> None:
    try:
        condition = compile_condition(text, source="p.yaml", line=2, col=3, term_lists=TERMS)
    except PolicyError as exc:
        assert exc.located and all(line >= 2 and col >= 1 for line, col, _ in exc.located)
        return
    assert isinstance(condition.evaluate(REQ), bool)
    assert all(isinstance(line, str) for line in condition.explain(REQ))


@SETTINGS
@given(st.text(max_size=200))
def test_arbitrary_text(text: str) -> None:
    _check(text)


@SETTINGS
@given(token_text)
def test_token_sequences(text: str) -> None:
    _check(text)


@SETTINGS
@given(grammatical)
def test_grammatical_conditions(text: str) -> None:
    _check(text)


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS + ["IF", "THEN", "ELSE", 'route_to("m")', "WITH", "timeout=1s", "x=1"]),
                max_size=40).map(" ".join))
def test_dsl_token_sequences(text: str) -> None:
    try:
        compile_dsl(text, source="p.dsl", term_lists=TERMS)
    except PolicyError as exc:
        assert exc.located
