"""The serving processes run on uvloop where it installs and on asyncio's loop where it does not (Windows).

Before, ``serve``, ``store`` and the prober imported uvloop at the top: declared only off Windows,
so there they failed at import.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import uvloop

from app.run.event_loop import new_event_loop

ROOT = Path(__file__).resolve().parents[3]


def test_uvloop_where_it_installs() -> None:
    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_without_uvloop_the_serving_modules_import_and_run_on_asyncio_s_loop() -> None:
    code = ("import sys; sys.modules['uvloop'] = None\n"  # what importing it gives where it is not installed
            "import app.run.serve, app.run.store, app.run.probe_service\n"
            "from app.run.event_loop import new_event_loop\n"
            "import asyncio; loop = new_event_loop(); print(type(loop).__module__, loop.run_until_complete("
            "asyncio.sleep(0, result=7))); loop.close()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["asyncio.unix_events", "7"]
