"""Another process holding a DuckDB file's write lock, for tests of what a locked database does to us."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def duckdb_held_elsewhere(path: Path) -> Iterator[None]:
    """Inside the block a child process has ``path`` open read-write (so locked); it exits when the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(path)!r}); print('held', flush=True); "
                               "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.communicate("", timeout=30)
