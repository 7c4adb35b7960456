"""A policy case's ``request_time`` without a zone is UTC, whatever the machine's zone.

Before, ``policy test`` and ``policy explain`` read it in the machine's zone (``astimezone()`` on a
naive time): the same file passed on a UTC machine and failed on a New York one. The CLI's
``--since`` already read such a time as UTC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CONFIG = """
fleet:
  instances:
    - {id: big-a, model: big, url: "http://127.0.0.1:9201"}
    - {id: small-a, model: small, url: "http://127.0.0.1:9202"}
"""
POLICY = """timezone: America/New_York
routing_matrix:
  - rule_name: one-am
    condition: "request_time.hour == 1"
    primary_target: small
tests:
  - name: 06:30 UTC is 01:30 EST (the first hour after the autumn change)
    request: {request_time: "2026-11-01T06:30:00"}
    expect: {rule: one-am, target: small}
  - name: 05:15 UTC is 01:15 EDT
    request: {request_time: "2026-06-01T05:15:00"}
    expect: {rule: one-am}
  - name: 01:30 UTC is 21:30 in New York
    request: {request_time: "2026-06-01T01:30:00"}
    expect: {rule: null}
"""


def routelens(config: Path | None, zone: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI under ``TZ=zone``, with ``--config config`` (None: the shipped routelens.yaml)."""
    head = [] if config is None else ["--config", str(config / "routelens.yaml")]
    return subprocess.run([sys.executable, "-m", "app", *head, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False, env={**os.environ, "TZ": zone})


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "routelens.yaml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "p.yaml").write_text(POLICY, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Tokyo", "UTC"])
def test_a_case_time_without_a_zone_is_utc(files: Path, zone: str) -> None:
    res = routelens(files, zone, "policy", "test", str(files / "p.yaml"), "--json")
    assert json.loads(res.stdout.splitlines()[-1]) == {"n": 3, "passed": 3, "failed": []}, res.stdout + res.stderr
    assert res.returncode == 0
    res = routelens(files, zone, "policy", "explain", str(files / "p.yaml"), "--json", "--request",
                    json.dumps({"request_time": "2026-11-01T06:30:00"}))
    out = json.loads(res.stdout.splitlines()[-1])
    assert out["rule"] == "one-am", res.stdout + res.stderr
    assert out["tried"][0]["detail"] == ["request_time.hour == 1: true (request_time.hour=1)"]


def test_the_shipped_policy_cases_pass_on_a_new_york_machine() -> None:
    res = routelens(None, "America/New_York", "policy", "test", str(ROOT / "policies" / "seed000.yaml"), "--json")
    assert res.returncode == 0 and json.loads(res.stdout.splitlines()[-1]) == {"n": 8, "passed": 8, "failed": []}
