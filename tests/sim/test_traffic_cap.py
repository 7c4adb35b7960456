"""``sim traffic`` says when it stopped on ``--max-requests`` rather than at the end of ``--duration``.

Found by a soak audit: a 28-minute run at 30 requests/s stopped after 20,000 requests (the default
cap), 11 minutes in, and its summary read like a complete run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from tests.sim.test_traffic_unreachable import _serving


@pytest.fixture
def gateway() -> Iterator[str]:
    yield from _serving(10**9)  # answers every chat request with 200


@pytest.fixture(autouse=True)
def _no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default --config is absent here: defaults, never the shipped file
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)


def test_a_run_cut_short_by_the_cap_says_so_and_names_the_option(
        gateway: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "summary.json"
    assert main(["sim", "traffic", "--api", gateway, "--duration", "600", "--rps", "20", "--max-requests", "3",
                 "--no-feedback", "--json", str(summary)]) == 0
    out = capsys.readouterr().out
    figures = json.loads(summary.read_text())
    assert figures["requests"] == 3 and figures["stopped_by"] == "max_requests"
    assert 0 <= figures["stopped_at_s"] < 1.0  # three arrivals at 20/s: well inside the first second
    lines = [line for line in out.splitlines() if "stopped at" in line]
    assert len(lines) == 1, out
    assert "stopped at 3 requests (--max-requests)" in lines[0] and "s into the 600 s schedule" in lines[0]


def test_a_run_that_ends_with_its_duration_says_nothing_of_the_cap(
        gateway: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "summary.json"
    assert main(["sim", "traffic", "--api", gateway, "--duration", "0.5", "--rps", "8", "--no-feedback",
                 "--json", str(summary)]) == 0
    assert json.loads(summary.read_text())["stopped_by"] == "duration"
    assert "--max-requests" not in capsys.readouterr().out
