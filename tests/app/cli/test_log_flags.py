"""``--log-level``/``--log-format`` on ``serve``, ``store``, ``probes run`` and ``demo``: what each hands its run.

Each command's run is replaced by a recorder (these tests are about the command line, before
anything starts): the settings it would log with, a bad flag refused by argparse (exit 2), a bad
variable refused naming it (exit 2) before anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import main
from app.run.logs import FORMAT_ENV, LEVEL_ENV, LogSettings
from app.run.procs import free_port

COMMANDS = {"serve": ["serve"], "store": ["store", "--port", "1"], "probes run": ["probes", "run"], "demo": ["demo"]}


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The settings each command's run was handed: recorded, nothing started."""
    import app.run.demo as demo
    import app.run.probe_service as probe_service
    import app.run.serve as serve
    import app.run.store as store

    seen: list[Any] = []
    monkeypatch.setattr(serve, "run_server", lambda config, **kw: seen.append(kw["log"]))
    monkeypatch.setattr(store, "run_store", lambda config, **kw: seen.append(kw["log"]))
    monkeypatch.setattr(probe_service, "run", lambda args, *log: seen.append(log[0] if log else None) or 0)
    monkeypatch.setattr(demo, "run_demo", lambda config, **kw: seen.append(kw["log"]) or 0)
    monkeypatch.delenv(LEVEL_ENV, raising=False)
    monkeypatch.delenv(FORMAT_ENV, raising=False)
    return seen


@pytest.fixture
def cfg(tmp_path: Path) -> str:
    path = tmp_path / "routelens.yaml"
    path.write_text(yaml.safe_dump({
        "gateway": {"port": free_port()}, "storage": {"duckdb_path": str(tmp_path / "t.duckdb")},
        "probes": {"enabled": False},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]},
    }))
    return str(path)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_without_flags_or_variables_the_default_is_warning_in_text(command: str, cfg: str, runs: list[Any]) -> None:
    assert main(["--config", cfg, *COMMANDS[command]]) == 0
    assert runs == [LogSettings("warning", "text")]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_flags_reach_the_run_and_beat_the_variables(
        command: str, cfg: str, runs: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEVEL_ENV, "loud")  # not read: its flag is given
    monkeypatch.setenv(FORMAT_ENV, "text")
    assert main(["--config", cfg, *COMMANDS[command], "--log-level", "DEBUG", "--log-format", "json"]) == 0
    assert runs == [LogSettings("debug", "json")]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_variables_are_the_defaults(
        command: str, cfg: str, runs: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LEVEL_ENV, "info")
    monkeypatch.setenv(FORMAT_ENV, "json")
    assert main(["--config", cfg, *COMMANDS[command]]) == 0
    assert runs == [LogSettings("info", "json")]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("flag", "value"), [("--log-level", "verbose"), ("--log-format", "yaml")])
def test_a_bad_flag_is_refused_by_argparse_naming_it(
        command: str, flag: str, value: str, cfg: str, runs: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--config", cfg, *COMMANDS[command], flag, value])
    assert exited.value.code == 2 and runs == []
    assert f"argument {flag}: invalid choice: '{value}'" in capsys.readouterr().err


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("variable", "value"), [(LEVEL_ENV, "verbose"), (FORMAT_ENV, "yaml")])
def test_a_bad_variable_is_refused_naming_it_before_anything_starts(
        command: str, variable: str, value: str, cfg: str, runs: list[Any], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(variable, value)
    assert main(["--config", cfg, *COMMANDS[command]]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert runs == [] and err.startswith(f"error: {variable}='{value}' is not a log "), err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_names_both_flags_and_variables(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([*COMMANDS[command], "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in ("--log-level {debug,info,warning,error}", "--log-format {text,json}", LEVEL_ENV, FORMAT_ENV):
        assert text in out
