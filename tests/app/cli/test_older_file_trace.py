"""``routelens trace --db FILE`` over a trace file from before columns existed (read-only, never migrated)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from ingest import DuckDBTraceStore
from schemas import DecisionTrace
from tests.app import stub_trace_api as stub
from tests.ingest.duckdb.test_older_file_store import make_older


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def test_an_older_trace_prints_with_what_it_never_recorded_said_so(tmp_path: Path, trace: DecisionTrace,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "traces.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records([trace.model_copy(update={"otel_trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"})])
    finally:
        store.close()
    make_older(path)
    assert main(["trace", stub.SAMPLE_REQUEST_ID, "--db", str(path)]) == 0
    tree = capsys.readouterr().out
    assert "file_types: not recorded" in tree and stub.SELECTED_INSTANCE in tree
    assert main(["trace", stub.SAMPLE_REQUEST_ID, "--db", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["otel_trace_id"] is None and got["features"]["file_types"] == []
    assert main(["trace", "4bf92f3577b34da6a3ce929d0e0e4736", "--db", str(path)]) == 1  # its trace id: never recorded
