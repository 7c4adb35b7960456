"""What a policy author wrote is what the router does, or the file is refused at the place written.

Found by following docs/policies.md as a stranger: a DSL target was reported at its clause's IF, a
``max_wait`` without ``overflow: wait`` was silently never waited, a matrix rule could share its
name (and so its throttle bucket) with a DSL clause, a second ``rule_name`` was reported at 1:1,
and ``language == "ZH"``, ``file_type == "PDF"`` or ``prompt_contains(' ')`` compiled to a rule
that never fires.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from router_core.errors import PolicyError
from router_core.rules.cases import run_cases
from router_core.rules.load import compile_policy
from schemas.config import RouteLensConfig

ROOT = Path(__file__).resolve().parents[3]


def config(*instances: dict[str, Any]) -> RouteLensConfig:
    return RouteLensConfig.model_validate({"fleet": {"instances": [
        {"url": f"http://127.0.0.1:{9000 + i}", **spec} for i, spec in enumerate(instances)]}})


FLEET = config({"id": "a", "model": "big"}, {"id": "b", "model": "small"})


def errors(text: str, source: str = "p.yaml") -> str:
    with pytest.raises(PolicyError) as info:
        compile_policy(text, source, FLEET)
    return str(info.value)


def col(text: str, line: int, needle: str) -> int:
    return text.splitlines()[line - 1].index(needle) + 1


DSL = 'IF intent == "code"\n  THEN route_to("nope")\n  WITH fallback=["small",\n    "gone"], compression="fa"\n'


@pytest.mark.parametrize(("source", "text", "first_line"), [
    ("p.dsl", DSL, 1),
    ("p.yaml", "routing_dsl: |\n" + "".join("  " + ln + "\n" for ln in DSL.splitlines()), 2),
    ("p.yaml", 'routing_dsl: >\n  IF intent == "code"\n  THEN route_to("nope") WITH fallback=["small", "gone"],'
               ' compression="fa"\n', 2),
], ids=["bare-dsl", "yaml-block", "yaml-folded"])
def test_a_dsl_target_error_is_at_its_literal(source: str, text: str, first_line: int) -> None:
    message = errors(text, source)
    lines = text.splitlines()
    want = []
    for needle, what in [('"nope"', "primary target 'nope'"), ('"gone"', "fallback target 'gone'"),
                         ('"fa"', "declares feature 'fa'")]:
        line = next(i for i, ln in enumerate(lines, 1) if needle in ln)
        want.append((f"{source}:{line}:{col(text, line, needle)}:", what))
    for where, what in want:
        assert any(ln.startswith(where) and what in ln for ln in message.splitlines()), (where, message)
    assert f"{source}:{first_line}:{col(text, first_line, 'IF')}:" not in message  # not at the clause's IF


def test_max_wait_without_overflow_wait_is_refused_in_a_matrix() -> None:
    text = ("routing_matrix:\n"
            "  - rule_name: a\n    throttle_config: {max_rps: 5, max_wait: 2s}\n"
            "  - rule_name: b\n    throttle_config: {max_rps: 5, overflow: reject, max_wait: 2s}\n"
            "  - rule_name: c\n    throttle_config: {max_rps: 5, overflow: wait, max_wait: 2s}\n")
    message = errors(text)
    assert message.splitlines() == [
        f"p.yaml:3:{col(text, 3, 'max_wait')}: routing_matrix[0].throttle_config.max_wait: applies only with "
        "overflow: wait (this throttle's overflow is chain: a request finding the bucket empty goes down the chain"
        " at once)",
        f"p.yaml:5:{col(text, 5, 'max_wait')}: routing_matrix[1].throttle_config.max_wait: applies only with "
        "overflow: wait (this throttle's overflow is reject: a request finding the bucket empty is refused at once)",
    ]
    ok = compile_policy(text.split("  - rule_name: a")[0] + "  - rule_name: c" + text.split("  - rule_name: c")[1],
                        "p.yaml", FLEET)
    assert ok.rules[0].throttle is not None and ok.rules[0].throttle.max_wait_s == 2.0


def test_max_wait_without_overflow_wait_is_refused_in_the_dsl() -> None:
    text = 'IF intent == "x" THEN route_to("big") WITH max_rps=5, max_wait=2s\n'
    assert errors(text, "p.dsl") == (f"p.dsl:1:{col(text, 1, 'max_wait')}: max_wait applies only with "
                                     'overflow="wait" (this clause\'s overflow is chain)')
    rules = compile_policy(text.replace("max_wait", 'overflow="wait", max_wait'), "p.dsl", FLEET)
    assert rules.rules[0].throttle is not None and rules.rules[0].throttle.max_wait_s == 2.0


@pytest.mark.parametrize(("name", "dsl", "why"), [
    ("clause-1", 'routing_dsl: IF intent == "x" THEN route_to("big")\n', "a clause of this file's routing_dsl"),
    ("else", 'routing_dsl: IF intent == "x" THEN route_to("big") ELSE route_to("small")\n',
     "a clause of this file's routing_dsl"),
    ("keywords", "", "the rule routing.keywords routes by"),
], ids=["clause-1", "else", "keywords"])
def test_a_matrix_rule_may_not_take_a_name_another_rule_has(name: str, dsl: str, why: str) -> None:
    text = f"routing_matrix:\n  - rule_name: {name}\n    throttle_config: {{max_rps: 1}}\n{dsl}"
    assert errors(text) == f"p.yaml:2:16: routing_matrix[0].rule_name: {name!r} is the name of {why}" + (
        " (the DSL names its clauses clause-1, clause-2..., else)" if dsl else "")


def test_a_second_rule_name_is_reported_at_the_second_rule() -> None:
    text = "routing_matrix:\n  - rule_name: a\n  - rule_name: b\n  - rule_name: a\n"
    assert errors(text) == "p.yaml:4:16: routing_matrix[2].rule_name: rule_name used twice: a (first at line 2)"


@pytest.mark.parametrize(("condition", "literal", "message"), [
    ('language == "ZH"', '"ZH"', "language is one of zh, en, mixed, unknown: it is never 'ZH', so == 'ZH' never "
                                 "holds; write 'zh'"),
    ('language != "chinese"', '"chinese"', "language is one of zh, en, mixed, unknown: it is never 'chinese', so "
                                           "!= 'chinese' always holds"),
    ('language in ["en", "cn"]', '"cn"', "language is one of zh, en, mixed, unknown: it is never 'cn'"),
    ('file_type == "PDF"', '"PDF"', "file_type is a short lower-case type name: it is never 'PDF'; write 'pdf'"),
    ('file_type in ["png", "jpeg"]', '"jpeg"', "file_type is a short lower-case type name: it is never 'jpeg'; "
                                               "write 'jpg'"),
    ('file_type == "johndoe"', '"johndoe"', "file_type is never 'johndoe': the gateway types an attachment as one "
                                           "of the type names it knows (schemas/config/attachments.py, NAMED_TYPES) "
                                           "or 'unknown'"),
    ("prompt_contains(' ')", "' '", "prompt_contains needs a string with something other than spaces in it"),
], ids=["language-upper", "language-word", "language-list", "file-type-upper", "file-type-alias", "file-type-unnamed",
        "blank-text"])
def test_a_literal_the_request_never_has_is_refused_at_it(condition: str, literal: str, message: str) -> None:
    text = f"routing_matrix:\n  - rule_name: a\n    condition: '{condition.replace(chr(39), chr(39) * 2)}'\n"
    line3 = text.splitlines()[2]
    at = line3.index(literal.replace("'", "''")) + 1
    assert errors(text) == f"p.yaml:3:{at}: {message}"


def test_the_words_a_request_can_have_still_compile() -> None:
    text = ("routing_matrix:\n  - rule_name: a\n    condition: 'language in [\"zh\", \"en\", \"mixed\", \"unknown\"]"
            " && file_type in [\"pdf\", \"jpg\", \"unknown\", \"txt\", \"py\"] && prompt_contains(\"第 {n} 章\")'\n")
    assert [r.name for r in compile_policy(text, "p.yaml", FLEET).rules] == ["a"]


def test_a_case_file_type_is_read_as_the_gateway_types_attachments() -> None:
    text = ("routing_matrix:\n  - rule_name: pdf\n    condition: \"file_type == 'pdf'\"\n    primary_target: big\n"
            "  - rule_name: jpg\n    condition: \"file_type == 'jpg'\"\n    primary_target: small\n"
            "tests:\n  - name: upper\n    request: {file_types: [PDF]}\n    expect: {rule: pdf, target: big}\n"
            "  - name: alias\n    request: {file_types: [JPEG]}\n    expect: {rule: jpg, target: small}\n")
    results = run_cases(compile_policy(text, "p.yaml", FLEET))
    assert [(r.rule, r.passed) for r in results] == [("pdf", True), ("jpg", True)]


def test_policy_check_prints_a_dsl_target_at_its_literal(tmp_path: Path) -> None:
    (tmp_path / "routelens.yaml").write_text(
        "fleet:\n  instances:\n    - {id: a, model: big, url: 'http://127.0.0.1:9'}\n", encoding="utf-8")
    policy = tmp_path / "p.yaml"
    policy.write_text('routing_dsl: |\n  IF query_length > 9\n    THEN route_to("big")\n'
                      '    WITH fallback="smal"\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "app", "policy", "--config", str(tmp_path / "routelens.yaml"),
                           "check", str(policy)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stderr
    out = (done.stdout + done.stderr).strip()
    assert out == (f"{policy}:4:19: rule clause-1: fallback target 'smal' does not exist (models: big)"), out
