"""Every command in the README's tables answers ``--help``, and ``routelens --version`` names the version."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.acceptance.conftest import Clone
from tests.acceptance.readme import table_commands

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MIN_COMMANDS = 10  # so a README whose tables lost their commands cannot pass


def test_every_command_in_the_readme_tables_answers_help(clone: Clone, subtests: pytest.Subtests) -> None:
    commands = table_commands((clone.path / "README.md").read_text(encoding="utf-8"))
    for prefix, words in commands:
        shown = f"{prefix}{' '.join(words)} --help"
        with subtests.test(msg=shown):
            program = [clone.routelens] if prefix == "routelens " else [clone.python, "-m", "bench"]
            done = clone.run([*program, *words, "--help"])
            assert done.returncode == 0, f"{shown}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            assert "usage:" in done.stdout.lower(), f"{shown}: no usage text\n{done.stdout[-2000:]}"
    assert len(commands) >= MIN_COMMANDS, f"only {len(commands)} commands in the README's tables: {commands}"


def test_routelens_version(clone: Clone) -> None:
    declared = tomllib.loads((clone.path / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    done = clone.run([clone.routelens, "--version"])
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"routelens {re.escape(declared)}\n?", done.stdout), done.stdout + done.stderr
