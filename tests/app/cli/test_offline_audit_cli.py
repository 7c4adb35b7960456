"""The offline CLIs from a stranger's audit: each refusal one clear line naming the file at fault, exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.cli import main
from app.cli.intents import read_cases
from bench.intent_sets import write_set

ROOT = Path(__file__).resolve().parents[3]
OK = "a:\n  - reset my password\n  - reset it now\nb:\n  - what is the weather\n  - rain tomorrow\n"
FLEET = 'fleet: {instances: [{id: a, model: big, url: "http://127.0.0.1:9"}]}\n'
POLICY = "routing_matrix:\n  - {rule_name: long, condition: 'input_length > 9000', primary_target: big}\n"


@pytest.fixture(autouse=True)
def _here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here


def _error(err: str) -> str:
    """The one ``error:`` line of ``err``."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0].removeprefix("error: ")


# -- 1. intents eval: a case line has exactly the keys text and expected --------------------------------------


@pytest.mark.parametrize("key", ["expect", "Expected", "expectd"])
def test_a_case_with_a_misspelt_expected_is_refused(key: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # the old code read it as a missing 'expected', null: out of scope, exit 0 and a wrong abstain_recall
    (tmp_path / "r.yaml").write_text(OK)
    case = json.dumps({"text": "reset it", key: "a"})
    (tmp_path / "c.jsonl").write_text('{"text": "weather", "expected": null}\n' + case + "\n")
    assert main(["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl", "--no-escalate", "--json"]) == 2
    out, err = capsys.readouterr()
    assert _error(err).startswith(f"c.jsonl:2: unknown key {key!r}: did you mean 'expected'?") and out == ""


def test_other_keys_are_the_writers_and_a_missing_expected_is_out_of_scope_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The interface (issue 32) is text and expected: a writer's own keys are left alone, a missing one is null."""
    (tmp_path / "r.yaml").write_text(OK)
    (tmp_path / "c.jsonl").write_text('{"text": "weather", "id": 7, "source": "held-out"}\n'
                                      '{"text": "reset it", "expected": "a", "note": 1}\n')
    assert main(["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl", "--no-escalate", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["n"] == 2
    assert "c.jsonl: 1 case(s) without 'expected' (line 1) read as out of scope (null)" in " ".join(err.split())


@pytest.mark.parametrize("name", ["ha_en_test.jsonl", "ha_zh_test.jsonl"])
def test_the_repositorys_cases_files_still_read(name: str) -> None:
    cases = read_cases(str(ROOT / "data" / "intents" / name))
    assert cases and any(e is None for _, e in cases) and any(e is not None for _, e in cases)


def test_the_bench_writer_writes_what_eval_reads(tmp_path: Path) -> None:
    _, cases = write_set(tmp_path, "x", ({"a": ["one", "two"]}, [("hello", "a"), ("zxqv", None)]))
    assert read_cases(str(cases)) == [("hello", "a"), ("zxqv", None)]


# -- 2, 7. intents add: a FILE without utterances, a routes file not there ------------------------------------


@pytest.mark.parametrize("text", ["", "\n  \n\t\n"], ids=["empty", "blank"])
def test_add_a_file_without_utterances_names_the_file(text: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "routes.yaml").write_text(OK)
    (tmp_path / "empty.txt").write_text(text)
    assert main(["intents", "add", "chat", "empty.txt", "--routes", "routes.yaml"]) == 2
    assert _error(capsys.readouterr().err) == "empty.txt: no utterances (one a line)"
    assert (tmp_path / "routes.yaml").read_text() == OK


def test_add_to_a_routes_file_not_there_is_refused_unless_create(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "routes.yaml").write_text(OK)
    (tmp_path / "new.txt").write_text("hello there\n")
    assert main(["intents", "add", "chat", "new.txt", "--routes", "nosuch.yaml"]) == 2
    assert _error(capsys.readouterr().err) == "nosuch.yaml: no such routes file (--create starts a new one)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.txt", "routes.yaml"]
    assert main(["intents", "add", "chat", "new.txt", "--routes", "nosuch.yaml", "--create"]) == 0
    assert (tmp_path / "nosuch.yaml").read_text() == '"chat":\n  - "hello there"\n'


def test_add_help_names_create(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["intents", "add", "--help"])
    assert "--create" in capsys.readouterr().out
    doc = " ".join((ROOT / "docs" / "policies.md").read_text("utf-8").split())
    assert "`routelens intents add ROUTE FILE [--routes R] [--create]`" in doc


# -- 5. a routes file's YAML syntax error: one line, headed as the routes file's --------------------------------


def test_a_routes_files_yaml_error_is_one_line_under_its_own_heading(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_text("a:\n  - x\n - y\n")
    (tmp_path / "c.jsonl").write_text('{"text": "x", "expected": null}\n')
    assert main(["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl", "--no-escalate"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: invalid routes file",
        "r.yaml:3: routes: YAML syntax error at column 2: expected <block end>, but found '<block sequence start>'"]


def test_add_refusing_an_utterance_of_another_route_gives_its_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_text(OK)
    (tmp_path / "u.txt").write_text("rain tomorrow\n")
    assert main(["intents", "add", "a", "u.txt", "--routes", "r.yaml"]) == 2
    assert capsys.readouterr().err.splitlines()[1].startswith("r.yaml:6: b: 'rain tomorrow' is already an example")


# -- 3. a command needing the configuration, with none here -------------------------------------------------


@pytest.mark.parametrize("argv", [["policy", "check", "p.yaml"], ["policy", "test", "p.yaml"],
                                  ["policy", "explain", "p.yaml", "--request", "{}"]],
                         ids=lambda a: a[1])
def test_no_configuration_here_is_said_in_one_line(argv: list[str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert _error(err) == f"no routelens.yaml in {os.getcwd()}; --config FILE names another" and out == ""


def test_a_configuration_here_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    (tmp_path / "routelens.yaml").write_text(FLEET)
    assert main(["policy", "check", "p.yaml"]) == 0
    assert capsys.readouterr().out.startswith("p.yaml: ok, 1 rules")


# -- 4, 8. policy files: a byte not UTF-8 where it is; a case expecting a rule the file lacks --------------------


def test_policy_check_names_the_line_of_a_byte_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "routelens.yaml").write_text(FLEET)
    (tmp_path / "latin1.yaml").write_bytes(b"# caf\xe9\n" + POLICY.encode())
    assert main(["policy", "check", "latin1.yaml"]) == 2
    assert capsys.readouterr().out == "latin1.yaml:1:6: not UTF-8: byte 0xe9 (a policy file is UTF-8 text)\n"


def test_policy_test_refuses_a_case_expecting_no_rule_of_the_file(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "routelens.yaml").write_text(FLEET)
    case = "  - {name: big input, request: {input_length: 9500}, expect: {rule: lnog}}"
    (tmp_path / "p.yaml").write_text(f"{POLICY}tests:\n{case}\n")
    assert main(["policy", "test", "p.yaml"]) == 2  # it had run, FAILed and exited 1
    assert capsys.readouterr().out.startswith(f"p.yaml:4:{case.index('lnog') + 1}: tests[0] ('big input'): "
                                              "expect.rule 'lnog' names no rule of this file (rules: long;")


# -- 6. schema --arrow: the whole contract ------------------------------------------------------------------


def test_schema_arrow_prints_every_element_whole(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--arrow"]) == 0
    out = capsys.readouterr().out
    assert "omitted" not in out
    assert "features: struct<requested_model: " in out and "  child 0, requested_model: " in out


# -- 8. state parse-metrics: the line at fault ----------------------------------------------------------------


def test_parse_metrics_names_the_line_it_cannot_parse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.txt").write_text("vllm:num_requests_waiting 3\n\n# HELP x y\nvllm:num_requests_running abc\n")
    assert main(["state", "parse-metrics", "m.txt"]) == 2
    assert _error(capsys.readouterr().err) == ("m.txt: parse: unparseable metrics at line 4: ValueError: could not "
                                               "convert string to float: 'abc'")


def test_parse_metrics_json_output_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.txt").write_text("vllm:num_requests_waiting 3\nvllm:num_requests_running 1\n")
    assert main(["state", "parse-metrics", "m.txt"]) == 0
    assert json.loads(capsys.readouterr().out)["queue"] == 3.0
