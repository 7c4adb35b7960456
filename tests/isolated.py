"""Run a snippet in a Python process of its own: code that may crash the interpreter (a segfault in a C
extension) then fails the test that runs it, not the whole pytest session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_isolated(code: str, timeout_s: float = 60) -> str:
    """``code``'s standard output; the test fails (with the exit status and stderr) unless it exits 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return done.stdout
