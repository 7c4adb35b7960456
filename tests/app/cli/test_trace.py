"""``routelens trace REQUEST_ID [--api URL | --db FILE] [--json]``: exit 0 and print, 1 unknown, 2 no source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from ingest import DuckDBTraceStore
from schemas import DecisionTrace
from tests.app import stub_trace_api as stub
from tests.app.trace_file import trace_file_of
from tests.duckdb_lock import duckdb_held_elsewhere


@pytest.fixture
def trace_file(tmp_path: Path, trace: DecisionTrace) -> Path:
    return trace_file_of(tmp_path / "traces.duckdb", [trace])


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: nothing but the options chooses the source


def test_from_a_file_known_and_unknown(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", stub.SAMPLE_REQUEST_ID, "--db", str(trace_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["selected_instance"] == stub.SELECTED_INSTANCE
    assert main(["trace", "req_other", "--db", str(trace_file)]) == 1
    assert "no trace for request_id 'req_other'" in capsys.readouterr().err
    DuckDBTraceStore(trace_file).close()  # the command closed the file again


def test_a_w3c_trace_id_finds_its_decision(tmp_path: Path, trace: DecisionTrace,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"  # what Jaeger or Tempo shows for the request
    path = tmp_path / "otel.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records([trace.model_copy(update={"request_id": "req-traced", "otel_trace_id": trace_id,
                                                      "otel_span_id": "b7ad6b7169203331"})])
    finally:
        store.close()
    assert main(["trace", trace_id, "--db", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["request_id"] == "req-traced"
    assert main(["trace", "0af7651916cd43dd8448eb211c80319c", "--db", str(path)]) == 1  # no such trace


def test_from_the_api_prints_the_tree(stub_api: stub.StubTraceApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", stub.SAMPLE_REQUEST_ID, "--api", stub_api.url]) == 0
    out = capsys.readouterr().out
    assert f"Decision trace {stub.SAMPLE_REQUEST_ID}" in out and "REJECTED" in out
    assert main(["trace", "req-nope", "--api", stub_api.url]) == 1
    assert "no trace for request_id 'req-nope'" in capsys.readouterr().err


def test_the_api_url_from_the_environment(
    stub_api: stub.StubTraceApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROUTELENS_API_URL", stub_api.url)
    assert main(["trace", stub.SAMPLE_REQUEST_ID, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["request_id"] == stub.SAMPLE_REQUEST_ID


@pytest.mark.parametrize(
    ("kind", "message"), [("api", "unreachable"), ("db", "does not exist"),
                          ("locked", "is in use by another process")]
)
def test_no_source_answers_exits_2(
    kind: str, message: str, closed_port_url: str, trace_file: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if kind == "api":
        code = main(["trace", "req-1", "--api", closed_port_url])
    elif kind == "db":
        code = main(["trace", "req-1", "--db", str(tmp_path / "nope.duckdb")])
    else:
        with duckdb_held_elsewhere(trace_file):
            code = main(["trace", "req-1", "--db", str(trace_file)])
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert "cannot read traces" in err and message in err


def test_no_server_falls_back_to_the_configured_file(
    closed_port_url: str, trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = closed_port_url.rsplit(":", 1)[1]
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(
        "fleet:\n  instances:\n    - {id: a, model: m, url: 'http://127.0.0.1:9'}\n"
        f"gateway:\n  port: {port}\nstorage:\n  duckdb_path: {trace_file}\n"
    )

    assert main(["trace", stub.SAMPLE_REQUEST_ID, "--config", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["request_id"] == stub.SAMPLE_REQUEST_ID
    # --api names one source: no fallback to the file.
    assert main(["trace", stub.SAMPLE_REQUEST_ID, "--config", str(cfg), "--api", closed_port_url]) == 2


def test_with_no_config_here_the_unreachable_default_says_it_is_the_default(
    closed_port_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A folder without routelens.yaml: the URL asked is the built-in default, and the message says why that one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.setattr("app.cli._common.DEFAULT_API_URL", closed_port_url)
    assert main(["trace", "req-1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "unreachable" in err and f"(no routelens.yaml in {tmp_path}: that URL is the default)" in err
