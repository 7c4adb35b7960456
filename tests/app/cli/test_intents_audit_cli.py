"""``intents eval|add`` on the intents audit's bad input: one clear error, exit 2, nothing lost; or a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main

OK = "a:\n  - reset my password\n  - reset it now\nb:\n  - what is the weather\n  - rain tomorrow\n"
CASES = '{"text": "reset my password please", "expected": "a"}\n{"text": "weather", "expected": null}\n'


@pytest.fixture(autouse=True)
def _here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: the default settings


def _error(err: str) -> str:
    assert "Traceback" not in err and err.startswith("error:"), err
    return " ".join(err.split())


def test_eval_routes_not_utf8_names_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_bytes(OK.encode().replace(b"reset it", b"r\xffset it"))
    (tmp_path / "c.jsonl").write_text(CASES)
    assert main(["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl"]) == 2
    assert "r.yaml:3: routes: not UTF-8: byte 0xff at column 6" in _error(capsys.readouterr().err)


def test_eval_cases_not_utf8_names_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_text(OK)
    (tmp_path / "c.jsonl").write_bytes(CASES.encode() + b'{"text": "ok \xff", "expected": "a"}\n')
    assert main(["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl"]) == 2
    assert "c.jsonl:3: not UTF-8: byte 0xff at column 14" in _error(capsys.readouterr().err)


def test_add_blames_the_routes_file_not_utf8_not_the_clean_utterances(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = OK.encode().replace(b"rain", b"r\xe9in")
    (tmp_path / "r.yaml").write_bytes(raw)
    (tmp_path / "one.txt").write_text("hello\n")
    assert main(["intents", "add", "a", "one.txt", "--routes", "r.yaml"]) == 2
    err = _error(capsys.readouterr().err)
    assert "r.yaml:6: routes: not UTF-8: byte 0xe9 at column 6" in err and "one.txt" not in err
    assert (tmp_path / "r.yaml").read_bytes() == raw


def test_add_utterances_not_utf8_name_their_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_text(OK)
    (tmp_path / "u.txt").write_bytes(b"fine\nx \xff y\n")
    assert main(["intents", "add", "a", "u.txt", "--routes", "r.yaml"]) == 2
    assert "u.txt:2: not UTF-8: byte 0xff at column 3" in _error(capsys.readouterr().err)
    assert (tmp_path / "r.yaml").read_text() == OK


def test_a_case_expecting_no_route_is_refused_naming_its_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_text(OK)
    (tmp_path / "c.jsonl").write_text(CASES + '\n{"text": "refund", "expected": "biling"}\n')
    assert main(["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl", "--no-escalate"]) == 2
    err = _error(capsys.readouterr().err)
    assert "c.jsonl:4: 'expected' names no route of r.yaml: 'biling' (routes: a, b;" in err


def test_an_utterance_under_two_routes_is_a_warning_in_the_report(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_text(OK + "  - Reset my password\n")
    (tmp_path / "c.jsonl").write_text(CASES)
    assert main(["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl", "--no-escalate", "--json"]) == 0
    out, err = capsys.readouterr()
    warning = ("r.yaml:7: b: the same utterance as line 2 of route 'a': an utterance under two routes contradicts "
               "itself (keep it under one)")
    assert json.loads(out.strip().splitlines()[-1])["warnings"] == [warning]
    assert err.count("warning:") == 1 and warning in " ".join(err.split())


def test_a_route_of_one_example_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_text("a:\n  - reset my password\nb:\n  - what is the weather\n  - rain\n")
    (tmp_path / "c.jsonl").write_text(CASES)
    assert main(["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl"]) == 2
    assert "r.yaml:1: a: 1 example: a route needs at least 2" in _error(capsys.readouterr().err)


def test_add_writes_a_route_of_one_example_and_says_it_is_not_refitted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.yaml").write_text(OK)
    (tmp_path / "one.txt").write_text("hello\n")
    assert main(["intents", "add", "c", "one.txt", "--routes", "r.yaml"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "c: 1 example in r.yaml" in err and "not refitted: c has fewer than 2 examples" in err
    assert (tmp_path / "r.yaml").read_text().endswith('"c":\n  - "hello"\n')
    assert not (tmp_path / "r.yaml.intents-cache.npz").exists()


def test_add_help_says_comments_are_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["intents", "add", "--help"])
    assert "other comment is dropped" in " ".join(capsys.readouterr().out.split())
