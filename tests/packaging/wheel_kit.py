"""RouteLens as a stranger gets it: a wheel built from a fresh clone, installed away from any checkout.

The clone holds the committed tree plus the uncommitted edits to tracked files (as in
``tests/acceptance``), so a file this checkout has but git does not cannot make a test pass. The
wheel is installed with ``pip install --no-deps --target``; its code runs from an empty folder with
``python -P`` and ``PYTHONPATH=<target>``, so it is the installed copy that is imported (before the
editable install of this virtualenv), while the dependencies are this virtualenv's.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "Installed", "build_wheel", "fresh_clone", "install_wheel"]

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 600  # a fresh virtualenv's pip fetches setuptools for an isolated build first
RUN_TIMEOUT_S = 120
_SETUPTOOLS_FLOOR = (77,)  # pyproject.toml's [build-system] requires setuptools>=77


def _git(*args: str, input: bytes | None = None) -> bytes:
    done = subprocess.run(["git", *args], input=input, capture_output=True, timeout=120)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}"
    return done.stdout


def _has_build_backend() -> bool:
    """This virtualenv's setuptools can build the project without an isolated (downloading) build."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(p) for p in version.split(".")[:1] if p.isdigit()) >= _SETUPTOOLS_FLOOR


@dataclass(frozen=True)
class Installed:
    """A wheel, and the folder it was installed into."""

    wheel: Path
    site: Path

    def names(self) -> list[str]:
        with zipfile.ZipFile(self.wheel) as z:
            return z.namelist()

    def metadata(self) -> str:
        with zipfile.ZipFile(self.wheel) as z:
            name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            return z.read(name).decode("utf-8")

    def run(self, argv: Sequence[str | Path], cwd: Path, safe_path: bool = True,
            timeout_s: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """``python -P ARGV`` in ``cwd`` with the installed copy on the path (``-P``: the console script's path).

        Without ``safe_path`` the interpreter gets only the options in ``argv``.
        """
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONSAFEPATH"}}
        env["PYTHONPATH"] = str(self.site)
        return subprocess.run([sys.executable, *(["-P"] if safe_path else []), *map(str, argv)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout_s)


def build_wheel(src: Path, out: Path, env: Mapping[str, str] | None = None) -> Path:
    """``pip wheel`` of ``src`` into ``out``: the one wheel it wrote."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(src)]
    if _has_build_backend():
        cmd.insert(4, "--no-build-isolation")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    wheels = sorted(out.glob("routelens-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def install_wheel(wheel: Path, target: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                           str(wheel)], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"pip install failed:\n{done.stderr[-3000:]}"
    return target


def fresh_clone(dest: Path) -> Path:
    """Clone this working tree into ``dest``: its tracked files, with their uncommitted edits."""
    _git("clone", "--quiet", str(ROOT), str(dest))
    diff = _git("-C", str(ROOT), "diff", "HEAD", "--binary", "--no-ext-diff", "--no-color")
    if diff.strip():
        _git("-C", str(dest), "apply", "--allow-empty", input=diff)
    return dest
