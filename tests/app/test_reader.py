"""app.reader: the one read path (ingest's HttpTraceStore or a read-only DuckDBTraceStore)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.reader import DEFAULT_API_URL, open_reader, read_trace, reader_from_env
from ingest import DuckDBTraceStore, HttpTraceStore, SinkError, SinkUnavailable
from schemas import DecisionTrace, RoutelensError
from tests.app import stub_trace_api as stub
from tests.app.trace_file import trace_file_of
from tests.duckdb_lock import duckdb_held_elsewhere


@pytest.fixture
def trace_file(tmp_path: Path, trace: DecisionTrace) -> Path:
    return trace_file_of(tmp_path / "traces.duckdb", [trace])


def test_http_found_round_trips(stub_api: stub.StubTraceApi, trace: DecisionTrace) -> None:
    got = read_trace(open_reader(api=stub_api.url), stub.SAMPLE_REQUEST_ID)

    assert got == trace
    assert stub_api.requests == [f"/v1/traces/{stub.SAMPLE_REQUEST_ID}"]


def test_http_unknown_is_none(stub_api: stub.StubTraceApi) -> None:
    assert read_trace(open_reader(api=stub_api.url + "/"), "req-missing") is None
    assert stub_api.requests == ["/v1/traces/req-missing"]


def test_http_quotes_the_id() -> None:
    odd = stub.sample_trace("tenant/a b?c")
    with stub.StubTraceApi([odd]) as api:
        assert read_trace(open_reader(api=api.url), "tenant/a b?c") == odd
        assert api.requests == ["/v1/traces/tenant%2Fa%20b%3Fc"]


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (500, b'{"detail": "boom"}', "HTTP 500"),
        (404, b'{"detail": "no such route"}', "HTTP 404"),  # a 404 that is not the gateway's "unknown id"
        (200, b'{"request_id": "x"}', "invalid trace"),
        (200, b"not json", "invalid trace"),
    ],
    ids=["server-error", "foreign-404", "wrong-shape", "not-json"],
)
def test_http_bad_answers_raise(status: int, body: bytes, message: str) -> None:
    with stub.StubTraceApi([], responses={"bad": (status, body)}) as api:
        with pytest.raises(SinkError, match=message):
            read_trace(open_reader(api=api.url), "bad")


def test_http_unreachable_raises(closed_port_url: str) -> None:
    with pytest.raises(SinkUnavailable, match="unreachable") as info:
        read_trace(open_reader(api=closed_port_url), "req-1")
    assert closed_port_url in str(info.value)
    assert isinstance(info.value, RoutelensError)


def test_env_db_wins(trace_file: Path) -> None:
    store = reader_from_env({"ROUTELENS_DB": str(trace_file), "ROUTELENS_API_URL": "http://10.0.0.1:9"})
    try:
        assert isinstance(store, DuckDBTraceStore)
        assert store.path == trace_file and store.read_only
    finally:
        store.close()


def test_env_api_url_and_default() -> None:
    store = reader_from_env({"ROUTELENS_API_URL": "http://127.0.0.1:9999/"})
    assert isinstance(store, HttpTraceStore) and store.base_url == "http://127.0.0.1:9999"
    default = reader_from_env({"ROUTELENS_DB": "  "})
    assert isinstance(default, HttpTraceStore) and default.base_url == DEFAULT_API_URL


def test_env_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROUTELENS_DB", raising=False)
    monkeypatch.setenv("ROUTELENS_API_URL", "http://127.0.0.1:1234")
    store = reader_from_env()
    assert isinstance(store, HttpTraceStore) and store.base_url == "http://127.0.0.1:1234"


def test_duckdb_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(SinkError, match="does not exist"):
        open_reader(db=tmp_path / "nope.duckdb")
    assert not (tmp_path / "nope.duckdb").exists()


def test_duckdb_file_read_only(trace_file: Path, trace: DecisionTrace) -> None:
    store = open_reader(db=trace_file)
    try:
        assert read_trace(store, stub.SAMPLE_REQUEST_ID) == trace
        assert read_trace(store, "req-missing") is None
        assert store.read_only
    finally:
        store.close()
    DuckDBTraceStore(trace_file).close()  # closed again: a writer can open it afterwards


def test_duckdb_file_a_server_writes_is_refused(trace_file: Path) -> None:
    with duckdb_held_elsewhere(trace_file), pytest.raises(SinkUnavailable, match=str(trace_file)):
        open_reader(db=trace_file)


def test_the_read_token_comes_from_the_variable_the_config_names(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from app.reader import token_from_config

    cfg = tmp_path / "r.yaml"
    cfg.write_text("storage: {read_token_env: MY_READ_TOKEN}\nfleet:\n  instances:\n"
                   "    - {id: a, model: m, url: 'http://127.0.0.1:1'}\n")
    monkeypatch.delenv("ROUTELENS_READ_TOKEN", raising=False)
    monkeypatch.setenv("MY_READ_TOKEN", " s3cret ")
    assert token_from_config(cfg) == "s3cret"
    monkeypatch.delenv("MY_READ_TOKEN")
    assert token_from_config(cfg) is None
    monkeypatch.setenv("ROUTELENS_READ_TOKEN", "fallback")  # no config file: the default variable
    assert token_from_config(tmp_path / "absent.yaml") == "fallback"
