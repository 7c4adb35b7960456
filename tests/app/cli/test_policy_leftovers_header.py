"""``policy explain --header``: a rule on ``header(...)`` explained from a chat body, as the gateway would match it.

``explain`` took a chat body but no headers (only a case's features had ``headers``), so such a
rule could not be explained from the request a user has. Also: a case's ``language`` outside the
analyser's four, and a file without rules, read as the other errors do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main

ROOT = Path(__file__).resolve().parents[3]
CONFIG = """fleet:
  instances:
    - {id: a, model: m, url: "http://127.0.0.1:9201"}
    - {id: b, model: n, url: "http://127.0.0.1:9202"}
"""
POLICY = """routing_matrix:
  - {rule_name: acme, condition: "header('x-tenant') == 'acme' && header('X-Plan') in ['gold']", primary_target: n}
"""
CHAT = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "Is this fine?"}]})


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "routelens.yaml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "p.yaml").write_text(POLICY, encoding="utf-8")
    return tmp_path / "routelens.yaml", tmp_path / "p.yaml"


def explain(files: tuple[Path, Path], request: str, *headers: str) -> list[str]:
    config, policy = files
    return ["--config", str(config), "policy", "explain", str(policy), "--json", "--request", request,
            *[arg for h in headers for arg in ("--header", h)]]


def run(files: tuple[Path, Path], request: str, capsys: pytest.CaptureFixture[str], *headers: str) -> dict[str, Any]:
    code = main(explain(files, request, *headers))
    out = capsys.readouterr().out
    assert code == 0, out
    got: dict[str, Any] = json.loads(out.splitlines()[-1])
    return got


def refused(files: tuple[Path, Path], request: str, capsys: pytest.CaptureFixture[str], *headers: str) -> str:
    assert main(explain(files, request, *headers)) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def test_a_chat_body_with_headers_matches_a_header_rule_through_the_real_cli(files: tuple[Path, Path]) -> None:
    done = subprocess.run([sys.executable, "-m", "app", *explain(files, CHAT, "X-Tenant: acme", "x-plan:gold")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["rule"] == "acme" and out["target"] == "n"
    assert out["tried"] == [{"rule": "acme", "matched": True, "detail": [
        "header('x-tenant') == 'acme': true (header('x-tenant')=\"acme\")",
        "header('X-Plan') in ['gold']: true (header('x-plan')=\"gold\")"]}]


def test_without_the_header_the_chat_body_does_not_match(files: tuple[Path, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert run(files, CHAT, capsys, "x-plan: gold")["rule"] is None
    assert run(files, CHAT, capsys, "x-tenant: acme", "x-plan: gold")["rule"] == "acme"


def test_a_header_joins_a_cases_own_headers_but_not_the_same_one_twice(
        files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    case = json.dumps({"input_length": 3, "headers": {"X-Plan": "gold"}})
    assert run(files, case, capsys, "x-tenant: acme")["rule"] == "acme"
    assert refused(files, case, capsys, "X-PLAN: gold") == (
        "error: --header x-plan: the request's features give it too (their headers)")


@pytest.mark.parametrize(("headers", "says"), [
    (("x-tenant=acme",), "error: --header 'x-tenant=acme': write NAME: VALUE, as in --header 'x-tenant: acme'"),
    ((": acme",), "error: --header ': acme': write NAME: VALUE, as in --header 'x-tenant: acme'"),
    (("x tenant: acme",), "error: --header 'x tenant: acme': write NAME: VALUE, as in --header 'x-tenant: acme'"),
    (("x-tenant: a\r\nx-plan: gold",), "error: --header x-tenant: a header value is one line"),
    (("x-tenant: acme", "X-Tenant: other"), "error: --header X-Tenant: given twice"),
], ids=["no-colon", "no-name", "space-in-name", "two-lines", "twice"])
def test_a_malformed_header_is_one_line_and_exit_2(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                                                   headers: tuple[str, ...], says: str) -> None:
    assert refused(files, CHAT, capsys, *headers) == says


def test_a_chat_bodys_own_headers_key_is_refused_not_ignored(files: tuple[Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    body = json.dumps({**json.loads(CHAT), "headers": {"x-tenant": "acme", "x-plan": "gold"}})
    assert refused(files, body, capsys) == (
        "error: --request: a chat body's headers are HTTP headers: give each with --header 'NAME: VALUE'")


def test_a_case_language_the_analyser_never_gives_is_named_in_one_line(
        files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert refused(files, json.dumps({"language": "chinese"}), capsys) == (
        "error: --request is not a chat request or a case's features: language: Input should be 'zh', 'en', "
        "'mixed' or 'unknown'")


def test_check_of_a_file_without_rules_reads_like_the_other_errors(
        files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config, policy = files
    policy.write_text("# rules to come\ntimezone: UTC\n", encoding="utf-8")
    assert main(["--config", str(config), "policy", "check", str(policy)]) == 2
    assert capsys.readouterr().out.strip() == f"{policy}:1:1: a policy file needs routing_matrix or routing_dsl"
