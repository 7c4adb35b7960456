"""``routelens policy check|test|explain FILE``, run as a process: exit codes and FILE:LINE:COL errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    assert ok.returncode == 0 and "ok, 2 rules, 8 test cases" in ok.stdout, ok.stdout + ok.stderr
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
    assert res.returncode == 0 and json.loads(res.stdout.splitlines()[-1]) == {"n": 8, "passed": 8, "failed": []}
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


CHAT_CONFIG = """
fleet:
  instances:
    - {id: a, model: m, url: "http://127.0.0.1:9201"}
    - {id: b, model: n, url: "http://127.0.0.1:9202"}
routing:
  keywords: {target: n, threshold: 100, patterns: [{pattern: "annual report", weight: 3}]}
"""
EXPLAINED = """routing_matrix:
  - {rule_name: long-question, condition: "query_length > 100", primary_target: n}
  - {rule_name: contract, condition: "intent == 'contract' && intent_confidence > 0.5", primary_target: n}
  - {rule_name: reports, condition: "keyword_score >= 3", primary_target: n}
"""


def explain(tmp_path: Path, config: str, body: object, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``policy explain`` run through the CLI's main, its JSON line."""
    from app.cli import main

    (tmp_path / "routelens.yaml").write_text(config, encoding="utf-8")
    (tmp_path / "p.yaml").write_text(EXPLAINED, encoding="utf-8")
    code = main(["--config", str(tmp_path / "routelens.yaml"), "policy", "explain", str(tmp_path / "p.yaml"),
                 "--json", "--request", json.dumps(body)])
    out = capsys.readouterr().out
    assert code == 0, out
    got: dict[str, Any] = json.loads(out.splitlines()[-1])
    return got


def chat(*messages: tuple[str, str], model: str = "auto") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": role, "content": text} for role, text in messages]}


def test_explain_reads_the_query_length_of_the_question_not_of_the_whole_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = chat(("system", "You are a careful assistant. Answer briefly and cite sources. " * 40),
                ("user", "Is this fine?"))
    out = explain(tmp_path, CHAT_CONFIG, body, capsys)
    assert out["rule"] is None and out["keyword_score"] == 0
    assert out["tried"][0] == {"rule": "long-question", "matched": False, "detail": ["query_length = 4 <= 100"]}


def test_explain_scores_the_keywords_as_the_gateway_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = explain(tmp_path, CHAT_CONFIG, chat(("user", "Summarise the annual report")), capsys)
    assert out["rule"] == "reports" and out["keyword_score"] == 3
    assert out["tried"][-1]["detail"] == ["keyword_score >= 3: true (keyword_score=3.0)"]
    named = explain(tmp_path, CHAT_CONFIG, chat(("user", "Summarise the annual report"), model="m"), capsys)
    assert named["rule"] is None and named["tried"] == [] and named["model"] == "m"  # the gateway tries no rule


def test_explain_takes_the_semantic_intent_of_routing_intents(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "routes.yaml").write_text((ROOT / "data/intents/routelens_routes.yaml").read_text("utf-8"), "utf-8")
    fast_only = CHAT_CONFIG + "  intents: {routes: routes.yaml, escalate: false, fast_threshold: 0.5}\n"
    out = explain(tmp_path, fast_only, chat(("user", "Check whether this NDA is reasonable")), capsys)
    assert out["rule"] == "contract" and out["intent"] == "contract" and out["intent_confidence"] > 0.6
    assert out["tried"][1]["detail"][0] == "intent == 'contract': true (intent=\"contract\")"


def test_explain_of_a_request_file_that_is_not_there_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    (tmp_path / "routelens.yaml").write_text(CHAT_CONFIG, encoding="utf-8")
    (tmp_path / "p.yaml").write_text(EXPLAINED, encoding="utf-8")
    missing = tmp_path / "nofile.json"
    assert main(["--config", str(tmp_path / "routelens.yaml"), "policy", "explain", str(tmp_path / "p.yaml"),
                 "--request", f"@{missing}"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"error: --request: cannot read {missing}: No such file or directory"]


def test_explain_gives_a_withheld_values_fingerprint_as_the_gateways_traces_keep_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """With router.hash_key_env's key set, the fingerprint is keyed, as the gateway keys it; without, plain."""
    import hashlib
    import hmac

    from app.cli import main

    (tmp_path / "routelens.yaml").write_text(CHAT_CONFIG + "router: {hash_key_env: EXPLAIN_TEST_KEY}\n", "utf-8")
    (tmp_path / "p.yaml").write_text(
        "routing_matrix:\n  - {rule_name: gold, condition: \"metadata.tier == 'gold'\", primary_target: n}\n", "utf-8")
    case = json.dumps({"input_length": 10, "metadata": {"tier": "silver-7"}})

    def detail() -> str:
        assert main(["--config", str(tmp_path / "routelens.yaml"), "policy", "explain", str(tmp_path / "p.yaml"),
                     "--json", "--request", case]) == 0
        line: str = json.loads(capsys.readouterr().out.splitlines()[-1])["tried"][0]["detail"][0]
        return line

    plain = hashlib.sha256(b"silver-7").hexdigest()[:8]
    assert detail() == f"metadata.tier = <withheld: 8 chars, sha256:{plain}> != \"gold\""
    monkeypatch.setenv("EXPLAIN_TEST_KEY", "k-123")
    keyed = hmac.new(b"k-123", b"silver-7", hashlib.sha256).hexdigest()[:8]
    assert detail() == f"metadata.tier = <withheld: 8 chars, hmac-sha256:{keyed}> != \"gold\""


@pytest.mark.parametrize(("request_json", "where"), [("[]", "the request"), ('{"input_length": "x"}', "input_length"),
                                                     ('{"request_time": "notadate"}', "request_time")])
def test_explain_names_a_bad_case_field_in_one_line(request_json: str, where: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """It printed pydantic's '1 validation error for CaseRequest' and three more lines, a link among them."""
    from app.cli import main

    assert main(["policy", "explain", str(SEED_000), "--request", request_json]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: --request is not a chat request or a case's features: {where}: ")
    assert "pydantic" not in line
