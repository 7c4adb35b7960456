"""``routelens trace --db FILE`` over a trace stored with a ts outside 1970 .. 9999 (before the intake refused it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from tests.ingest.duckdb.test_older_file_times import STORED, make_file


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def test_each_such_trace_prints_at_the_nearest_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was a pydantic traceback (exit 1) for every one of them."""
    old = make_file(tmp_path / "old.duckdb")
    for trace in old.traces[:len(STORED)]:
        assert main(["trace", trace.request_id, "--db", str(old.path)]) == 0
        out = capsys.readouterr().out
        assert f"ts {trace.ts.isoformat()} (out of range: stored at this time or" in out
        assert main(["trace", trace.request_id, "--db", str(old.path), "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["request_id"] == trace.request_id
        assert got["ts"] == trace.model_dump(mode="json")["ts"]


def test_a_trace_in_range_is_not_marked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = make_file(tmp_path / "old.duckdb")
    trace = old.traces[len(STORED)]
    assert main(["trace", trace.request_id, "--db", str(old.path)]) == 0
    out = capsys.readouterr().out
    assert f"ts {trace.ts.isoformat()}" in out
    assert "out of range" not in out
