"""The audit's CLI inputs: ``--api``, ``--api``/``--db``, ``--shares``, policy prefixes, counts, a 401, BadInput.

The audit's defects: ``trace --api notaurl`` blamed the server ("holds an invalid trace"), ``compare``
and ``replay`` died with a traceback; ``trace``/``app``/``compare`` took ``--api`` and ``--db`` together and
used one; ``compare --shares 0.9,0.9`` was taken; a policy prefix under 6 characters was "unknown" with no
word of the minimum (and ``sha256:a`` was taken); ``--max-tokens 0`` and ``--workers 0`` were taken; a
store's 401 did not say which variable holds the read token.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from app.cli import build_parser, main
from app.cli._common import BadInput
from app.run.procs import Child, app_command, free_port
from ingest import DuckDBTraceStore
from tests.ingest.experiments.experiment_data import END, POLICY, T0, experiment

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = str(ROOT / "routelens.yaml")
WINDOW = ["--since", T0.isoformat(), "--until", END.isoformat()]


class Execed(Exception):
    """``routelens app`` reached ``os.execve``."""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ROUTELENS_API_URL", "ROUTELENS_DB", "ROUTELENS_READ_TOKEN", "S15_READ_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: nothing but the options chooses the source


@pytest.fixture
def no_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    def execve(*_: object) -> None:
        raise Execed

    monkeypatch.setattr(os, "execve", execve)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "exp.duckdb"
    store = DuckDBTraceStore(path)
    traces, feedback = experiment(150, 150)
    store.write_records(traces)
    store.write_records(feedback)
    store.close()
    return path


def _one_error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# -- 1. a malformed --api URL: one line naming --api, exit 2, for every command with --api -----------------

API_COMMANDS = [
    ["trace", "req-1"],
    ["app"],
    ["compare", "a", "b", *WINDOW],
    ["replay", *WINDOW],
    ["replay", *WINDOW, "--policy", SHIPPED],
    ["sim", "traffic", "--duration", "0.5", "--rps", "1"],
]


@pytest.mark.parametrize("argv", API_COMMANDS, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("url", ["notaurl", "http://", "ftp://host:8080", "http://host:port", "127.0.0.1:8080"])
def test_a_malformed_api_url_is_refused_naming_api(argv: list[str], url: str, no_exec: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", SHIPPED, *argv, "--api", url]) == 2
    line = _one_error(capsys.readouterr().err)
    assert f"--api {url!r} is not an http:// or https:// URL with a host" in line, line


def test_a_malformed_url_in_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ROUTELENS_API_URL", "notaurl")
    assert main(["trace", "req-1"]) == 2
    assert "$ROUTELENS_API_URL 'notaurl' is not an http" in _one_error(capsys.readouterr().err)


# -- 2. --api with --db: refused, naming both ------------------------------------------------------------

@pytest.mark.parametrize("argv", [["trace", "req-1"], ["app"], ["compare", "a", "b", *WINDOW]],
                         ids=lambda a: a[0])
def test_api_and_db_together_are_refused(argv: list[str], db: Path, no_exec: None,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--api", "http://127.0.0.1:9", "--db", str(db)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --db: not allowed with argument --api" in err, err


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["trace", "app", "compare"])
def test_the_help_shows_api_and_db_as_alternatives(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert "[--api API | --db DB]" in _help(command, capsys)


# -- 3. --shares: two fractions of the traffic, each in (0, 1], summing to at most 1 ---------------------------

@pytest.mark.parametrize(("shares", "message"), [
    ("0.9,0.9", "sum to 1.8, more than all the traffic (1)"),
    ("0.6,0.5", "sum to 1.1, more than all the traffic (1)"),
    ("2,3", "above 0 and at most 1"),
    ("0,0.5", "above 0 and at most 1"),
    ("-0.5,0.5", "above 0 and at most 1"),
    ("nan,0.5", "above 0 and at most 1"),
    ("inf,0.5", "above 0 and at most 1"),
    ("0.5,0.3,0.2", "must be two numbers"),
    ("0.5", "must be two numbers"),
])
def test_shares_that_cannot_be_are_refused(shares: str, message: str, db: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "a", "b", *WINDOW, "--db", str(db), f"--shares={shares}", "--json"]) == 2
    captured = capsys.readouterr()
    line = _one_error(captured.err)
    assert line.startswith(f"error: --shares {shares!r}") and message in line, line
    assert captured.out == ""


@pytest.mark.parametrize("shares", ["0.5,0.5", "0.7,0.3", "0.3,0.3", "0.9,0.1", "0.6,0.4"])
def test_shares_of_a_design_are_taken(shares: str, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "a", "b", *WINDOW, "--db", str(db), "--shares", shares, "--json"]) == 0
    assert '"shares":[' in capsys.readouterr().out


# -- 4. a policy hash prefix needs 6 characters, and the help and the doc say so ---------------------------

@pytest.mark.parametrize("names", [("aaaaa", "bbbbbb"), ("sha256:a", "sha256:b"), ("sha256:aaaaa", "bbbbbbbb")])
def test_a_short_policy_prefix_is_refused_with_the_minimum(names: tuple[str, str], db: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", *names, *WINDOW, "--db", str(db), "--by", "policy", "--json"]) == 2
    line = _one_error(capsys.readouterr().err)
    assert f"{names[0]!r}" in line and "needs at least 6 characters" in line, line


def test_without_by_an_unknown_short_prefix_is_said_to_be_short(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "aaaaa", "bbbbb", *WINDOW, "--db", str(db), "--json"]) == 2
    err = capsys.readouterr().err
    policy_line = next(line for line in err.splitlines() if "by policy:" in line)
    assert "a policy hash prefix needs at least 6 characters" in policy_line, err


def test_a_six_character_prefix_and_a_whole_hash_are_taken(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    six = POLICY["a"].split(":")[1][:6]
    assert main(["compare", six, POLICY["b"], *WINDOW, "--db", str(db), "--by", "policy", "--json"]) == 0
    assert f'"a":"{POLICY["a"]}"' in capsys.readouterr().out


def test_the_help_and_the_doc_give_the_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    assert "a unique prefix of one of at least 6 characters" in _help("compare", capsys)
    doc = " ".join((ROOT / "docs" / "product-owners.md").read_text("utf-8").split())
    assert "a policy hash by a unique prefix of at least 6 characters" in doc


# -- 5. counts are at least 1 (argparse names the flag); serve --workers also takes 'auto' ------------------
# A --config that is not there: a flag argparse takes would end at main's check (exit 2) instead of running
# (the old code served a gateway, ran the prober, or became Streamlit).
ABSENT = ["--config", "absent.yaml"]


@pytest.mark.parametrize("argv", [
    ["intents", "eval", "--routes", "r.yaml", "--cases", "c.jsonl", "--max-tokens"],
    ["replay", *WINDOW, "--db", "t.duckdb", "--workers"],
    ["serve", "--workers"],
], ids=lambda a: f"{a[0]} {a[-1]}")
@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_count_below_one_is_refused(argv: list[str], value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*ABSENT, *argv, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[-1]}: " in err and "at least 1" in err, err


@pytest.mark.parametrize("argv", [["app", "--port"], ["probes", "run", "--port"]])
def test_a_port_flag_refuses_what_is_not_a_port(argv: list[str], no_exec: None,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*ABSENT, *argv, "0"])
    assert exit_.value.code == 2 and "1-65535" in capsys.readouterr().err


def test_serve_workers_takes_auto_and_counts() -> None:
    assert build_parser().parse_args(["serve", "--workers", "auto"]).workers == "auto"
    assert build_parser().parse_args(["serve", "--workers", "3"]).workers == 3


def test_serve_workers_auto_is_refused_with_the_store_in_process_when_it_means_more_than_one(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert main(["--config", SHIPPED, "serve", "--workers", "auto", "--store-in-process"]) == 2
    assert "--store-in-process runs one worker" in _one_error(capsys.readouterr().err)


# -- 6. a 401 names the variable that holds the read token ----------------------------------------------------

@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A ``routelens store`` whose query API wants the read token in ``$S15_READ_TOKEN``: (URL, its config)."""
    folder = tmp_path_factory.mktemp("keyed")
    cfg = folder / "keyed.yaml"
    cfg.write_text(yaml.safe_dump({
        "storage": {"duckdb_path": str(folder / "traces.duckdb"), "read_token_env": "S15_READ_TOKEN"},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:9"}]},
        "probes": {"enabled": False},
    }), encoding="utf-8")
    port = free_port()
    py, env = app_command({**os.environ, "S15_READ_TOKEN": "s15-secret", "PYTHONUNBUFFERED": "1"})
    child = Child("store", [*py, "--config", str(cfg), "store", "--port", str(port)], env, "store ready")
    try:
        assert child.wait_ready(60), child.tail()
        yield f"http://127.0.0.1:{port}", cfg
    finally:
        child.stop()


KEYED_COMMANDS = [["trace", "req-1"], ["compare", "a", "b", *WINDOW], ["replay", *WINDOW]]


@pytest.mark.parametrize("argv", KEYED_COMMANDS, ids=lambda a: a[0])
def test_a_401_says_which_variable_to_set(argv: list[str], keyed: tuple[str, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    url, cfg = keyed
    assert main(["--config", str(cfg), *argv, "--api", url]) == 2
    line = " ".join(_one_error(capsys.readouterr().err).split())
    assert "HTTP 401" in line and "set $S15_READ_TOKEN (storage.read_token_env of" in line, line


@pytest.mark.parametrize("argv", KEYED_COMMANDS, ids=lambda a: a[0])
def test_a_refused_token_names_the_variable_it_came_from(argv: list[str], keyed: tuple[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    url, cfg = keyed
    monkeypatch.setenv("S15_READ_TOKEN", "not-it")
    assert main(["--config", str(cfg), *argv, "--api", url]) == 2
    line = " ".join(_one_error(capsys.readouterr().err).split())
    assert "HTTP 401" in line and "the token in $S15_READ_TOKEN" in line and "not-it" not in line, line


def test_without_a_configured_variable_the_401_names_routelens_read_token(
        keyed: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "req-1", "--api", keyed[0]]) == 2
    assert "set $ROUTELENS_READ_TOKEN to the server's read token" in _one_error(capsys.readouterr().err)


def test_the_right_token_reads(keyed: tuple[str, Path], monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("S15_READ_TOKEN", "s15-secret")
    assert main(["--config", str(keyed[1]), "trace", "req-1", "--api", keyed[0]]) == 1  # read: no such request
    assert "no trace for request_id" in capsys.readouterr().err


def test_app_warns_of_a_401_naming_the_variable_and_starts(keyed: tuple[str, Path], no_exec: None,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Execed):
        main(["--config", str(keyed[1]), "app", "--api", keyed[0]])
    err = " ".join(capsys.readouterr().err.split())
    assert "warning:" in err and "HTTP 401" in err and "set $S15_READ_TOKEN" in err, err


# -- 7. BadInput from any command: main prints it as one line and exits 2 --------------------------------------

def test_main_prints_any_commands_bad_input(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(_: object) -> int:
        raise BadInput("FILE [x]: refused")

    monkeypatch.setattr("app.cli.state._parse_metrics", refuse)  # register reads it when the parser is built
    assert main(["state", "parse-metrics", "-"]) == 2
    assert _one_error(capsys.readouterr().err) == "error: FILE [x]: refused"
