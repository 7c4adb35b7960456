"""Fixtures: the wheel built from a fresh clone of this tree, with and without a C compiler, installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packaging.wheel_kit import ROOT, Installed, build_wheel, fresh_clone, install_wheel


@pytest.fixture(scope="session")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of this working tree."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the wheel is built from a fresh clone")
    return fresh_clone((tmp_path_factory.mktemp("clone") / "routelens").resolve())


@pytest.fixture(scope="session")
def installed(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel as built where a C compiler is (CI, the image's build stage), installed."""
    wheel = build_wheel(source, tmp_path_factory.mktemp("dist"))
    return Installed(wheel, install_wheel(wheel, tmp_path_factory.mktemp("site")))


@pytest.fixture(scope="session")
def installed_without_compiler(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel as built where no C compiler is (``CC=false``: every compile fails), installed."""
    copy = fresh_clone(tmp_path_factory.mktemp("clone-nocc") / "routelens")  # no object file of the other build
    wheel = build_wheel(copy, tmp_path_factory.mktemp("dist-nocc"), env={"CC": "false", "LDSHARED": "false"})
    return Installed(wheel, install_wheel(wheel, tmp_path_factory.mktemp("site-nocc")))


@pytest.fixture
def empty_folder(tmp_path: Path) -> Path:
    """A user's own working folder: nothing of ours in it."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder
