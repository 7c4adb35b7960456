"""``routelens policy check|test|explain FILE``, run as a process: exit codes and FILE:LINE:COL errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SEED_000 = ROOT / "policies" / "seed000.yaml"
FIN_CONFIG = """
fleet:
  instances:
    - {id: vl-1, model: qwen-vl, url: "http://127.0.0.1:9201"}
    - {id: llama-1, model: llama3-8b, url: "http://127.0.0.1:9202", features: [flash-attn]}
"""


def routelens(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def fin_config(tmp_path: Path) -> Path:
    path = tmp_path / "fin.yaml"
    path.write_text(FIN_CONFIG, encoding="utf-8")
    return path


def test_check_accepts_the_shipped_policies(fin_config: Path) -> None:
    ok = routelens("policy", "check", str(SEED_000))
    assert ok.returncode == 0 and "ok, 2 rules, 6 test cases" in ok.stdout, ok.stdout + ok.stderr
    dsl = routelens("--config", str(fin_config), "policy", "check", str(ROOT / "policies" / "seed003.yaml"))
    assert dsl.returncode == 0, dsl.stdout + dsl.stderr


def test_check_names_file_line_and_column_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text('routing_matrix:\n  - rule_name: a\n    condition: "input_length >> 3"\n'
                   "    primary_target: gpt-9\n", encoding="utf-8")
    res = routelens("policy", "check", str(bad))
    assert res.returncode == 2
    lines = res.stdout.strip().splitlines()
    assert lines and all(line.startswith(f"{bad}:") for line in lines), res.stdout
    assert lines[0].startswith(f"{bad}:3:")
    line, col = (int(x) for x in lines[0][len(str(bad)) + 1:].split(":")[:2])
    assert line == 3 and col > 17


def test_test_runs_the_files_cases_and_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    res = routelens("policy", "test", str(SEED_000), "--json")
    assert res.returncode == 0 and json.loads(res.stdout.splitlines()[-1]) == {"n": 6, "passed": 6, "failed": []}
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(SEED_000.read_text(encoding="utf-8").replace("expect: {rule: urgent_ticket}",
                                                                 "expect: {rule: long_context_priority}"),
                     encoding="utf-8")
    res = routelens("policy", "test", str(wrong))
    assert res.returncode == 1 and "FAIL an urgent ticket at 16 o'clock is" in res.stdout


def test_explain_shows_which_clauses_matched_and_why() -> None:
    res = routelens("policy", "explain", str(SEED_000), "--json", "--request",
                    json.dumps({"input_length": 40, "prompt": "紧急!", "request_time": "2026-06-01T14:10:00+08:00"}))
    out = json.loads(res.stdout.splitlines()[-1])
    assert out["rule"] == "urgent_ticket" and out["origin"].endswith("seed000.yaml:18:5")
    assert [t["matched"] for t in out["tried"]] == [False, True]
    assert "request_time.hour in [9,11,14,16]: true (request_time.hour=14)" in out["tried"][1]["detail"]
    chat = {"model": "auto", "messages": [{"role": "user", "content": "Review the indemnification clause"}]}
    res = routelens("policy", "explain", str(SEED_000), "--request", json.dumps(chat))
    assert res.returncode == 0 and "MATCH long_context_priority" in res.stdout
    assert "contains_legal_terms(prompt): true" in res.stdout
    bad = routelens("policy", "explain", str(SEED_000), "--request", "{not json")
    assert bad.returncode == 2 and "--request" in bad.stderr
