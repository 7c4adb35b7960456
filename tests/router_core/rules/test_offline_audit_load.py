"""Policy files from the offline-CLI audit: a byte not UTF-8 at its line and column, rules written but empty
said where, and a test case expecting a rule the file does not have refused at load (by ``policy check|test``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from router_core.errors import PolicyError
from router_core.rules.load import compile_policy, load_policy
from schemas.config import RouteLensConfig

FLEET = RouteLensConfig.model_validate({"fleet": {"instances": [
    {"id": "a", "model": "big", "url": "http://127.0.0.1:9000"}]}})
RULES = "routing_matrix:\n  - {rule_name: long, condition: 'input_length > 9000', primary_target: big}\n"


def errors(text: str, *, strict_cases: bool = False) -> list[str]:
    with pytest.raises(PolicyError) as info:
        compile_policy(text, "p.yaml", FLEET, strict_cases=strict_cases)
    return str(info.value).splitlines()


@pytest.mark.parametrize(("raw", "where"), [
    (RULES.encode() + b"# caf\xe9\n", "3:6"),
    (RULES.encode() + "# ré".encode() + b"sum\xe9\n", "3:8"),  # columns count characters (not bytes: 9)
], ids=["ascii-before", "utf8-before"])
def test_a_byte_not_utf8_is_named_at_its_line_and_column(tmp_path: Path, raw: bytes, where: str) -> None:
    p = tmp_path / "latin1.yaml"
    p.write_bytes(raw)
    with pytest.raises(PolicyError) as info:
        load_policy(p, FLEET)
    assert str(info.value) == f"{p}:{where}: not UTF-8: byte 0xe9 (a policy file is UTF-8 text)"


def test_a_missing_policy_file_says_so_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(tmp_path / "nope.yaml", FLEET)
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}:1:1: cannot read the policy file: No such file or directory"


NEEDS = "empty (no rule): a policy file needs a rule in routing_matrix or routing_dsl"


@pytest.mark.parametrize(("text", "expected"), [
    ("routing_matrix: []\n", [f"p.yaml:1:17: routing_matrix: {NEEDS}"]),
    ('tests: []\nrouting_dsl: ""\n', [f"p.yaml:2:14: routing_dsl: {NEEDS}"]),
    ("routing_dsl:\n", [f"p.yaml:1:13: routing_dsl: {NEEDS}"]),
    ("routing_matrix: []\nrouting_dsl: '  '\n", [f"p.yaml:1:17: routing_matrix: {NEEDS}",
                                                 f"p.yaml:2:14: routing_dsl: {NEEDS}"]),
], ids=["matrix", "dsl", "dsl-null", "both"])
def test_rules_written_but_empty_are_said_to_be_empty_where_written(text: str, expected: list[str]) -> None:
    assert errors(text) == expected


def test_an_empty_dsl_beside_a_matrix_with_rules_is_fine() -> None:
    assert [r.name for r in compile_policy(RULES + "routing_dsl: ''\n", "p.yaml", FLEET).rules] == ["long"]


CASES = """tests:
  - name: long input
    request: {input_length: 9500}
    expect: {rule: lnog}
  - name: short input
    expect: {rule: null}
  - name: long again
    request: {input_length: 9500}
    expect: {rule: long, target: big}
"""


def test_a_case_expecting_a_rule_the_file_lacks_is_refused_naming_the_case_and_the_rules(tmp_path: Path) -> None:
    assert errors(RULES + CASES, strict_cases=True) == [
        "p.yaml:6:20: tests[0] ('long input'): expect.rule 'lnog' names no rule of this file (rules: long; null "
        "for a case no rule matches)"]
    (tmp_path / "p.yaml").write_text(RULES + CASES)
    with pytest.raises(PolicyError, match=r"p\.yaml:6:20: tests\[0\] \('long input'\)"):
        load_policy(tmp_path / "p.yaml", FLEET, strict_cases=True)


def test_the_gateways_load_runs_no_case_and_keeps_the_rules() -> None:
    assert [r.name for r in compile_policy(RULES + CASES, "p.yaml", FLEET).rules] == ["long"]


def test_dsl_clauses_are_rules_a_case_may_expect() -> None:
    text = ('routing_dsl: |\n  IF input_length > 9000 THEN route_to("big")\n'
            "tests:\n  - {name: c, request: {input_length: 9500}, expect: {rule: clause-1}}\n")
    assert [c.name for c in compile_policy(text, "p.yaml", FLEET, strict_cases=True).cases] == ["c"]
