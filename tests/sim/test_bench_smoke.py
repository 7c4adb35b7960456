"""``python -m bench sim`` as a short smoke: its interface, not its speed (speed belongs in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_bench_sim_prints_instances_and_rps_as_its_last_line():
    out = subprocess.run([sys.executable, "-m", "bench", "sim", "--requests", "320", "--concurrency", "8"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["instances"] == 16 and last["rps"] > 0
    assert last["requests"] == 320 and last["errors"] == 0
