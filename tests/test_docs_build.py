"""The documentation site builds in strict mode: a broken link or anchor fails ``make test``."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed: pip install -e '.[dev]'"
)


def _build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(project / "mkdocs.yml"),
         "--site-dir", str(site)],
        capture_output=True, text=True, timeout=300,
    )


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    page = project / "docs" / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](operators.md#no-such-heading)\n", encoding="utf-8")
    done = _build(project, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-heading" in done.stdout + done.stderr
