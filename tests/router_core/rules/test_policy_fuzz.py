"""The policy loader fuzzed: any text, as DSL or as a matrix file, compiles or fails as ``FILE:LINE:COL: message``.

Never another exception, never a hang (Hypothesis's deadline bounds each example). The strategies
mix the DSL's own words and the matrix's keys with arbitrary text, so most examples get past the
tokenizer or the YAML parser and reach the compiler, where the interesting failures are.
"""

from __future__ import annotations

import re

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from router_core.errors import PolicyError
from router_core.rules.load import compile_policy
from tests.router_core.conftest import make_config

CONFIG = make_config()
LOCATED = re.compile(r"^p\.(dsl|yaml):\d+:\d+: \S", re.M)
FUZZ = settings(max_examples=300, deadline=2000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

WORDS = ["IF", "ELSE", "THEN", "WITH", "AND", "OR", "NOT", "route_to(", ")", "(", "==", "!=", ">", "<", ">=", "in",
         "[", "]", ",", "=", '"big"', '"small"', "intent", "file_type", "query_length", "input_length", "language",
         "request_time.hour", "header('x-t')", "metadata.tier", "prompt_contains('x')", "timeout=", "fallback=",
         "8000ms", "1024", "0.5", '"legal"', "\n", " ", "  ", "\t", "#", "&&", "||", "!", "'", '"']
TOKENS = st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=4)), max_size=40).map(" ".join)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 100_000), st.floats(allow_nan=True), st.text(max_size=20),
                    TOKENS)
RULE = st.dictionaries(
    st.sampled_from(["rule_name", "condition", "primary_target", "fallback_chain", "cost_params", "throttle_config",
                     "priority", "timeout_policy", "resource_guarantee", "extra"]),
    st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=12), SCALARS, max_size=3)),
    max_size=8)
MATRIX = st.fixed_dictionaries({"routing_matrix": st.lists(RULE, max_size=4)}, optional={
    "tests": st.lists(st.dictionaries(st.sampled_from(["name", "request", "expect"]), SCALARS), max_size=2),
    "timezone": st.one_of(st.text(max_size=10), st.sampled_from(["UTC", "Asia/Shanghai", "Mars/Olympus"])),
    "degraded_targets": st.dictionaries(st.text(max_size=8), SCALARS, max_size=2),
    "model_fallbacks": st.dictionaries(st.sampled_from(["big", "small", "x"]), st.lists(SCALARS, max_size=2)),
    "routing_dsl": TOKENS})


def _compiles_or_is_located(text: str, source: str) -> None:
    try:
        compile_policy(text, source, CONFIG)
    except PolicyError as exc:
        assert LOCATED.match(str(exc)), str(exc)[:500]


@FUZZ
@given(TOKENS)
def test_any_dsl_text_compiles_or_names_file_line_and_column(text: str) -> None:
    _compiles_or_is_located(text, "p.dsl")


@FUZZ
@given(st.text(max_size=200))
@example("[" * 5000)  # found by hand beside the fuzzing: PyYAML's recursion, once a RecursionError
@example("a: &a [*a]")
def test_any_text_as_a_policy_file_compiles_or_names_file_line_and_column(text: str) -> None:
    _compiles_or_is_located(text, "p.yaml")


@FUZZ
@given(MATRIX)
def test_any_matrix_shaped_file_compiles_or_names_file_line_and_column(doc: dict[str, object]) -> None:
    _compiles_or_is_located(yaml.safe_dump(doc, allow_unicode=True), "p.yaml")
