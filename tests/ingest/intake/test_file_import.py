from __future__ import annotations

import json
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.cli import main
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.intake.field_mapping import GENERIC, map_record
from schemas import DecisionTrace, query_hash
from tests.duckdb_lock import duckdb_held_elsewhere


def write_jsonl(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_import_jsonl_counts_every_line_and_exits_by_the_result(tmp_path: Path, factory: TraceFactory,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    traces = list(factory.traces(20))
    good = write_jsonl(tmp_path / "good.jsonl", [t.model_dump_json().encode() for t in traces])
    db = tmp_path / "t.duckdb"
    assert main(["ingest", "import", str(good), "--db", str(db)]) == 0
    assert "accepted 20  rejected 0  stored 20" in capsys.readouterr().out
    assert main(["ingest", "import", str(good), "--db", str(db)]) == 0  # again: all already stored
    assert "stored 0  already stored 20" in capsys.readouterr().out
    bad = write_jsonl(tmp_path / "bad.jsonl", [traces[0].model_dump_json().encode(), b'{"request_id": 1}', b"]["])
    assert main(["ingest", "import", str(bad), "--db", str(db)]) == 1
    out = capsys.readouterr()
    assert "lines 3  accepted 1  rejected 2" in out.out and "quarantine" in out.err
    store = DuckDBTraceStore(db, read_only=True)
    assert store.count() == 20 and store.get(traces[5].request_id) == traces[5]
    store.close()
    assert main(["ingest", "import", str(tmp_path / "missing.jsonl"), "--db", str(db)]) == 2


def test_import_into_a_file_a_server_writes_is_refused_at_once(tmp_path: Path, factory: TraceFactory,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "t.jsonl", [factory.trace().model_dump_json().encode()])
    db = tmp_path / "t.duckdb"
    with duckdb_held_elsewhere(db):
        assert main(["ingest", "import", str(src), "--db", str(db)]) == 2
    assert "POST the traces to /v1/traces" in capsys.readouterr().err


def test_import_parquet(tmp_path: Path, factory: TraceFactory, capsys: pytest.CaptureFixture[str]) -> None:
    traces = list(factory.traces(10))
    rows = [orjson.loads(t.model_dump_json()) for t in traces]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    assert main(["ingest", "import", str(tmp_path / "t.parquet"), "--db", str(tmp_path / "t.duckdb")]) == 0
    assert "accepted 10" in capsys.readouterr().out
    store = DuckDBTraceStore(tmp_path / "t.duckdb", read_only=True)
    assert [store.get(t.request_id) for t in traces] == traces
    store.close()


FOREIGN = {"id": "chatcmpl-42", "timestamp": 1793491200, "model": "gpt-4o-mini", "api_base": "https://x/v1",
           "route": "code", "duration_ms": 812.5, "status_code": 200,
           "usage": {"prompt_tokens": 30, "completion_tokens": 12}, "response_cost": 0.0021,
           "messages": [{"role": "user", "content": "写一个排序函数"}], "team": "payments"}


def test_the_generic_mapping_hashes_the_query_and_never_keeps_it() -> None:
    mapped = map_record(FOREIGN, GENERIC)
    trace = DecisionTrace.model_validate(mapped)
    assert trace.request_id == "chatcmpl-42" and trace.selected_model == "gpt-4o-mini" and trace.rule == "code"
    assert trace.outcome.status == "ok" and trace.outcome.total_ms == 812.5 and trace.outcome.prompt_tokens == 30
    assert trace.ts.isoformat() == "2026-11-01T00:00:00+00:00"
    assert trace.query_hash == query_hash("写一个排序函数") and trace.features.n_messages == 1
    assert "排序" not in trace.model_dump_json() and "payments" not in str(mapped)  # unmapped: not kept
    # A custom mapping cannot copy the text either: it is only ever hashed.
    leaky = map_record(FOREIGN, {**GENERIC, "rule": ["messages", "route"]})
    assert "排序" not in str(leaky) and leaky["query_hash"] == trace.query_hash
    nested = {**FOREIGN, "request": {"prompt": "排序 secret", "route": "r"}}
    leaky = map_record(nested, {**GENERIC, "rule": ["request.prompt", "request.route"]})
    assert leaky["rule"] == "r" and "secret" not in str(leaky)


def test_the_query_is_the_last_user_message_and_its_text_parts_as_in_the_gateway() -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "earlier question"},
                {"role": "assistant", "content": "an answer"},
                {"role": "user", "content": [{"type": "text", "text": "这张图里"},
                                             {"type": "image_url", "image_url": {}},
                                             {"type": "text", "text": "是什么"}]}]
    mapped = map_record({**FOREIGN, "messages": messages}, GENERIC)
    assert mapped["query_hash"] == query_hash("这张图里\n是什么") and mapped["features"]["n_messages"] == 4


@pytest.mark.parametrize(("messages", "text"), [
    ([{"role": "user", "content": 5}], ""),  # malformed content counts as empty text, never an error
    ([{"role": "user", "content": [{"type": "text", "text": "a"}, "stray"]}], ""),
    ([{"role": "user", "content": "asked"}, {"content": "no role"}, "junk"], "asked"),  # no role: not a user message
    ([{"role": "system", "content": "only a system prompt"}], ""),
])
def test_the_importer_is_lenient_about_malformed_messages(messages: list[object], text: str) -> None:
    mapped = map_record({**FOREIGN, "messages": messages}, GENERIC)
    assert mapped["query_hash"] == query_hash(text) and mapped["features"]["input_chars"] == len(text)
    assert DecisionTrace.model_validate(mapped).features.n_messages == len(messages)


def test_import_with_the_generic_mapping_and_a_custom_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "litellm.jsonl", [json.dumps(FOREIGN, ensure_ascii=False).encode()])
    db = tmp_path / "t.duckdb"
    assert main(["ingest", "import", str(src), "--db", str(db), "--mapping", "generic"]) == 0
    custom = tmp_path / "map.json"
    custom.write_text(json.dumps({"rule": ["team"], "request_id": ["id"]}))
    other = write_jsonl(tmp_path / "o.jsonl", [json.dumps({**FOREIGN, "id": "other-1"}).encode()])
    assert main(["ingest", "import", str(other), "--db", str(db), "--mapping", str(custom)]) == 0
    capsys.readouterr()
    store = DuckDBTraceStore(db, read_only=True)
    got = store.get("other-1")
    assert got is not None and got.rule == "payments" and store.get("chatcmpl-42") is not None
    store.close()
