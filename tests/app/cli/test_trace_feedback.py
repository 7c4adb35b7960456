"""The feedback on one request, read by ``routelens trace`` (and the "Why this model" page) from each store.

``POST /v1/feedback`` takes one verdict per request (202, then 409); ``GET /v1/feedback?request_id=``
reads them back, correct or not, from the store behind the gateway. DuckDB answers it itself, the
HTTP client through the real gateway and query API, Elasticsearch through the contract server.
"""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.cli import main
from app.cli.trace import trace_json
from ingest import DuckDBTraceStore, HttpTraceStore
from ingest.elasticsearch.store import ElasticsearchStore
from schemas import DecisionTrace
from tests.app.ui.data import audit_cases as cases
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer
from tests.ingest.test_trace_store import served

VERDICT_LINE = "wrong: should have gone to coder-6b · from app · 2026-11-29 12:00:05 UTC"


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def post_feedback(url: str, body: dict[str, object]) -> int:
    req = urllib.request.Request(f"{url}/v1/feedback", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)


def test_from_a_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = cases.rule_with_chain()
    path = tmp_path / "t.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records([trace, cases.trial_failed(), cases.verdict(trace.request_id)])
    finally:
        store.close()
    assert main(["trace", trace.request_id, "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Feedback (1)" in out and VERDICT_LINE in out
    assert main(["trace", "req-trial", "--db", str(path)]) == 0
    assert "Feedback none recorded" in capsys.readouterr().out


ADDED = {"feedback", "feedback_error"}  # the keys --json adds beside the trace's own fields


def printed(capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, object], DecisionTrace]:
    """``--json``'s object, and the DecisionTrace its own fields make (extra="forbid": nothing else among them)."""
    out = json.loads(capsys.readouterr().out)
    return out, DecisionTrace.model_validate({k: v for k, v in out.items() if k not in ADDED})


def test_json_carries_the_feedback_the_tree_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, mark = cases.rule_with_chain(), cases.verdict(cases.rule_with_chain().request_id)
    path = tmp_path / "t.duckdb"
    store = DuckDBTraceStore(path)
    try:
        store.write_records([trace, cases.trial_failed(), mark])
    finally:
        store.close()
    assert main(["trace", trace.request_id, "--db", str(path), "--json"]) == 0
    out, fields = printed(capsys)
    assert fields == trace and out["policy"] is not None  # the whole trace, the policy step the tree shows too
    assert out["feedback"] == [mark.model_dump(mode="json")] and out["feedback_error"] is None
    assert (out["feedback"][0]["correct"], out["feedback"][0]["expected_model"]) == (False, "coder-6b")
    assert main(["trace", "req-trial", "--db", str(path), "--json"]) == 0
    out, fields = printed(capsys)
    assert fields == cases.trial_failed() and (out["feedback"], out["feedback_error"]) == ([], None)


@contextlib.contextmanager
def older_server(trace: DecisionTrace) -> Iterator[str]:
    """A query API from before ``GET /v1/feedback``: it serves the trace and nothing else (404 not_found)."""
    body = trace.model_dump_json().encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == f"/v1/traces/{trace.request_id}"
            data = body if ok else b'{"error": {"code": "not_found", "message": "no such route"}}'
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_json_says_when_the_feedback_could_not_be_read(capsys: pytest.CaptureFixture[str]) -> None:
    trace = cases.trial_failed()
    with older_server(trace) as url:
        assert main(["trace", trace.request_id, "--api", url, "--json"]) == 0
    out, fields = printed(capsys)
    assert fields == trace and out["feedback"] is None  # null, not [] ("none recorded")
    assert out["feedback_error"] == "GET /v1/feedback: HTTP 404: no such route"  # why, as the tree says it
    assert json.loads(trace_json(trace, None))["feedback"] is None  # not asked


def test_the_added_keys_are_no_field_of_the_trace() -> None:
    assert not ADDED & DecisionTrace.model_fields.keys()  # else --json would overwrite one


def test_a_verdict_posted_to_the_gateway_is_read_back_through_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    trace = cases.trial_failed()
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.write_records([trace])
    with served(store, tmp_path / "spool") as url:
        mark = {"request_id": trace.request_id, "correct": False, "expected_model": "m", "source": "app"}
        assert post_feedback(url, mark) == 202
        assert post_feedback(url, {**mark, "correct": True}) == 409  # one verdict per request
        got = HttpTraceStore(url).feedback(trace.request_id)
        assert [(f.correct, f.expected_model, f.source) for f in got] == [(False, "m", "app")]
        assert HttpTraceStore(url).feedback("req-none") == []
        assert main(["trace", trace.request_id, "--api", url]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if "should have gone to" in x)
        assert main(["trace", trace.request_id, "--api", url, "--json"]) == 0
    store.close()
    assert line.strip().removeprefix("└── ").startswith("wrong: should have gone to m · from app · ")
    out, fields = printed(capsys)
    assert fields == trace and out["feedback_error"] is None
    assert [(f["correct"], f["expected_model"], f["source"]) for f in out["feedback"]] == [(False, "m", "app")]


def test_elasticsearch_reads_the_verdicts_of_one_request() -> None:
    trace = cases.trial_failed()
    mine, right, other = (cases.verdict(trace.request_id), cases.verdict("req-other"),
                          cases.verdict("req-" + trace.request_id, correct=True))
    with ContractServer() as server:
        store = ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")
        store.write_records([trace])  # then its feedback (which copies the trace's context)
        store.write_records([mine, right, other])
        assert store.feedback(trace.request_id) == [mine]
        assert store.feedback("req-missing") == []
        store.close()
    assert server.violations == []
