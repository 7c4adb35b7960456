"""app.run.demo.routelens_command: what the demo prints is a command that works as typed."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from app.run.demo import routelens_command


def script(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A virtualenv's bin folder with an interpreter and the routelens console script."""
    script(tmp_path / "repo" / ".venv" / "bin" / "python")
    script(tmp_path / "repo" / ".venv" / "bin" / "routelens")
    return tmp_path / "repo" / ".venv" / "bin"


def test_started_as_python_m_app_prints_the_venv_script_relative_to_cwd(venv: Path) -> None:
    repo = venv.parents[1]
    got = routelens_command(argv0=str(repo / "app" / "__main__.py"), executable=str(venv / "python"), path="",
                            cwd=repo)
    assert got == ".venv/bin/routelens"


def test_the_bare_name_when_path_finds_that_very_script(venv: Path) -> None:
    got = routelens_command(argv0=str(venv / "routelens"), executable=str(venv / "python"), path=str(venv),
                            cwd=venv.parents[1])
    assert got == "routelens"


def test_another_routelens_on_path_is_not_ours(venv: Path, tmp_path: Path) -> None:
    other = script(tmp_path / "elsewhere" / "routelens")
    got = routelens_command(argv0="x", executable=str(venv / "python"), path=str(other.parent), cwd=tmp_path / "x")
    assert got == str(venv / "routelens")  # outside cwd: the absolute path


def test_the_script_we_were_started_as_wins(venv: Path, tmp_path: Path) -> None:
    pipx = script(tmp_path / "pipx bin" / "routelens")
    got = routelens_command(argv0=str(pipx), executable=str(venv / "python"), path="", cwd=tmp_path / "x")
    assert shlex.split(got) == [str(pipx)]  # quoted: the folder name has a space


def test_a_script_in_cwd_itself_gets_dot_slash(venv: Path) -> None:
    assert routelens_command(argv0="x", executable=str(venv / "python"), path="", cwd=venv) == "./routelens"


def test_no_script_falls_back_to_python_m_app(tmp_path: Path) -> None:
    python = script(tmp_path / "py" / "python3")
    got = routelens_command(argv0="x", executable=str(python), path="", cwd=tmp_path)
    assert shlex.split(got) == [str(python), "-m", "app"]
