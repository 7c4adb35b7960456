"""``routelens --version`` names the installed distribution; ``--help`` ends with example commands."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)


def test_version_prints_the_installed_distribution_version() -> None:
    done = _run("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "routelens " + importlib.metadata.version("routelens")
    assert done.stderr == ""


def test_help_ends_with_examples() -> None:
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    examples = done.stdout.split("examples:\n", 1)[1]
    for command in ("routelens demo", "routelens serve", "routelens trace REQUEST_ID", "routelens app"):
        assert f"  {command} " in examples
