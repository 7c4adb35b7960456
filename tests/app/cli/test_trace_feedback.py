"""The feedback on one request, read by ``routelens trace`` (and the "Why this model" page) from each store.

``POST /v1/feedback`` takes one verdict per request (202, then 409); ``GET /v1/feedback?request_id=``
reads them back, correct or not, from the store behind the gateway. DuckDB answers it itself, the
HTTP client through the real gateway and query API, Elasticsearch through the contract server.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app.cli import main
from ingest import DuckDBTraceStore, HttpTraceStore
from ingest.elasticsearch.store import ElasticsearchStore
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
    store.close()
    line = next(x for x in capsys.readouterr().out.splitlines() if "should have gone to" in x)
    assert line.strip().removeprefix("└── ").startswith("wrong: should have gone to m · from app · ")


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
