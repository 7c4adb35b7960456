"""``routelens policy check`` flags a request time the request never has, as its other findings: FILE:LINE:COL.

Before, the shipped seed policy with ``request_time.hour in [9, 25]`` (or ``> 30``) checked ``ok``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SEED_000 = ROOT / "policies" / "seed000.yaml"
URGENT = "request_time.hour in [9,11,14,16]"


@pytest.mark.parametrize(("condition", "message"), [
    ("request_time.hour in [9, 25]", "request_time.hour is a whole number from 0 to 23: it is never 25"),
    ("request_time.hour > 30", "request_time.hour > 30 never holds: request_time.hour is a whole number from 0 to 23"),
])
def test_check_reports_the_file_line_and_field_and_exits_2(tmp_path: Path, condition: str, message: str) -> None:
    text = SEED_000.read_text(encoding="utf-8")
    assert text.count(URGENT) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(URGENT, condition), encoding="utf-8")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if URGENT in row)
    res = subprocess.run([sys.executable, "-m", "app", "policy", "check", str(bad)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    [found] = res.stdout.splitlines()
    where, _, said = found.partition(": ")
    assert where.startswith(f"{bad}:{line}:") and said == message
