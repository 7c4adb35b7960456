"""constraints.txt: the versions the suite passes with, which `make install` and the image install.

Without it a fresh clone (CI) and a `docker build` resolve whatever the registry holds that day: the
suite could pass with one set and the image ship another. The lock is the closure of
``routelens[probes,es,dev,bench]`` at the installed versions (.ci/lock.py); a dependency added to
pyproject.toml without locking it, or a version moved in the venv, fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
_CONTINUED = re.compile(r"\\\n")


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text("utf-8").splitlines():
        if line and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"constraints.txt: {line}: pin one version"
            pins[canonicalize_name(req.name)] = spec.version
    return pins


def test_the_lock_is_what_this_environment_passes_with() -> None:
    done = subprocess.run([sys.executable, str(ROOT / ".ci/lock.py"), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_every_declared_dependency_is_pinned() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    declared = list(project["dependencies"]) + [r for group in project["optional-dependencies"].values()
                                               for r in group]
    pins = _pins()
    missing = [r for r in declared if canonicalize_name(Requirement(r).name) not in pins]
    assert not missing, f"declared in pyproject.toml, not in constraints.txt (run .ci/lock.py): {missing}"
    # and each pin satisfies what pyproject.toml asks of it
    for raw in declared:
        req = Requirement(raw)
        name = canonicalize_name(req.name)
        if name in pins:
            assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} against {raw}"


def _pip_installs(text: str) -> list[str]:
    joined = _CONTINUED.sub(" ", text)
    return [m.group(0) for m in re.finditer(r"pip install[^\n&;]*", joined)]


def test_make_install_and_the_image_install_with_the_lock() -> None:
    make = [line for line in _pip_installs((ROOT / "Makefile").read_text("utf-8"))
            if "PHOENIX" not in line and "--upgrade pip" not in line and "arize-phoenix" not in line]
    docker = _pip_installs((ROOT / "Dockerfile").read_text("utf-8"))
    assert len(make) >= 2 and docker, (make, docker)
    for line in make + docker:
        assert "-c constraints.txt" in line or "-c /tmp/constraints.txt" in line, f"not locked: {line}"
    assert re.search(r"^COPY constraints\.txt ", (ROOT / "Dockerfile").read_text("utf-8"), re.M)
    assert re.search(r"^\$\(STAMP\):.*constraints\.txt", (ROOT / "Makefile").read_text("utf-8"), re.M), \
        "a new lock does not reinstall the venv"
