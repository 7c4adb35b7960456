from __future__ import annotations

from pathlib import Path

import pytest

from app.trace_source import (
    DEFAULT_API_URL,
    DuckDBFileSource,
    HttpTraceSource,
    TraceSourceError,
    source_from_env,
)
from schemas import DecisionTrace, RoutelensError
from tests.app import stub_trace_api as stub


def test_http_found_round_trips(stub_api: stub.StubTraceApi, trace: DecisionTrace) -> None:
    got = HttpTraceSource(stub_api.url).get(stub.SAMPLE_REQUEST_ID)

    assert got == trace
    assert stub_api.requests == [f"/v1/traces/{stub.SAMPLE_REQUEST_ID}"]


def test_http_unknown_is_none(stub_api: stub.StubTraceApi) -> None:
    assert HttpTraceSource(stub_api.url + "/").get("req-missing") is None
    assert stub_api.requests == ["/v1/traces/req-missing"]


def test_http_quotes_the_id() -> None:
    odd = stub.sample_trace("tenant/a b?c")
    with stub.StubTraceApi([odd]) as api:
        assert HttpTraceSource(api.url).get("tenant/a b?c") == odd
        assert api.requests == ["/v1/traces/tenant%2Fa%20b%3Fc"]


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (500, b'{"detail": "boom"}', "returned HTTP 500"),
        (200, b'{"request_id": "x"}', "invalid trace"),
        (200, b"not json", "invalid trace"),
    ],
    ids=["server-error", "wrong-shape", "not-json"],
)
def test_http_bad_answers_raise(status: int, body: bytes, message: str) -> None:
    with stub.StubTraceApi([], responses={"bad": (status, body)}) as api:
        with pytest.raises(TraceSourceError, match=message):
            HttpTraceSource(api.url).get("bad")


def test_http_unreachable_raises(closed_port_url: str) -> None:
    with pytest.raises(TraceSourceError, match="unreachable") as info:
        HttpTraceSource(closed_port_url, timeout_s=1.0).get("req-1")
    assert closed_port_url in str(info.value)
    assert isinstance(info.value, RoutelensError)


def test_env_db_wins(tmp_path: Path) -> None:
    db = tmp_path / "traces.duckdb"
    source = source_from_env({"ROUTELENS_DB": str(db), "ROUTELENS_API_URL": "http://10.0.0.1:9"})
    assert isinstance(source, DuckDBFileSource)
    assert source.path == db


def test_env_api_url_and_default() -> None:
    source = source_from_env({"ROUTELENS_API_URL": "http://127.0.0.1:9999/"})
    assert isinstance(source, HttpTraceSource) and source.api_url == "http://127.0.0.1:9999"
    default = source_from_env({"ROUTELENS_DB": "  "})
    assert isinstance(default, HttpTraceSource) and default.api_url == DEFAULT_API_URL


def test_env_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROUTELENS_DB", raising=False)
    monkeypatch.setenv("ROUTELENS_API_URL", "http://127.0.0.1:1234")
    source = source_from_env()
    assert isinstance(source, HttpTraceSource) and source.api_url == "http://127.0.0.1:1234"


def test_duckdb_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(TraceSourceError, match="does not exist"):
        DuckDBFileSource(tmp_path / "nope.duckdb").get("req-1")


def test_duckdb_file_read_only(tmp_path: Path, trace: DecisionTrace) -> None:
    ingest = pytest.importorskip("ingest")
    path = tmp_path / "traces.duckdb"
    store = ingest.DuckDBTraceStore(path)
    try:
        store.write_records([trace])
    finally:
        store.close()

    source = DuckDBFileSource(path)
    assert source.get(stub.SAMPLE_REQUEST_ID) == trace
    assert source.get("req-missing") is None
    # Each lookup closes the file again: a writer can reopen it afterwards.
    ingest.DuckDBTraceStore(path).close()
