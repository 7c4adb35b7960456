"""NaN and infinities in an intake line are refused naming the field, whatever form they take.

Found by an audit of ``POST /v1/traces`` and ``routelens ingest import --mapping generic``:
``"duration_ms": 1e400`` was refused as ``malformed JSON: number is infinity when parsed as double:
line 1 column 96``, a bare ``NaN`` or ``Infinity`` as ``unexpected character ... column 110``
(neither named the field), and the string ``"nan"`` as ``outcome.total_ms: Input should be greater
than or equal to 0`` (the wrong reason: NaN compares false with the bound).
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from app.cli import main
from bench.synthetic import T0, TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.intake.field_mapping import GENERIC
from ingest.intake.lines import check_record, split_records
from ingest.pipeline.emitter import TraceEmitter
from tests.ingest.http_api.test_routes import Call, ndjson, serve

FINITE = "Input should be a finite number"


def with_number(raw: bytes, field: str, value: bytes) -> bytes:
    """``raw`` with the (first) number under ``field`` written as ``value``."""
    out, n = re.subn(rb'"' + field.encode() + rb'":[-0-9.eE+]+', b'"' + field.encode() + b'":' + value, raw, count=1)
    assert n == 1, f"no number under {field}"
    return out


def log_line(rid: str, value: bytes, field: str = "duration_ms") -> bytes:
    """Another router's log line (the generic mapping) with ``value`` written as it is under ``field``."""
    head = orjson.dumps({"request_id": rid, "ts": "2024-01-01T00:00:00Z", "model": "m", "prompt": "hi",
                         "duration_ms": 12, "cost": 0.5})[:-1]
    return head + b',"' + field.encode() + b'":' + value + b"}"  # the later key wins in every parser


# value as written on duration_ms (outcome.total_ms, ge=0) or cost (outcome.cost, ge=0)
MAPPED = [
    (b"1e400", "duration_ms", "outcome.total_ms (duration_ms in the line)"),
    (b"-1e400", "duration_ms", "outcome.total_ms (duration_ms in the line)"),
    (b"NaN", "duration_ms", "outcome.total_ms (duration_ms in the line)"),
    (b"Infinity", "duration_ms", "outcome.total_ms (duration_ms in the line)"),
    (b"-Infinity", "cost", "outcome.cost (cost in the line)"),
    (b'"nan"', "duration_ms", "outcome.total_ms"),
    (b'"-inf"', "duration_ms", "outcome.total_ms"),
    (b'" NaN "', "cost", "outcome.cost"),
    (b'"inf"', "cost", "outcome.cost"),
]


@pytest.mark.parametrize(("value", "field", "named"), MAPPED, ids=[f"{f}={v.decode()}" for v, f, _ in MAPPED])
def test_a_mapped_line_names_the_field_and_says_it_is_not_finite(value: bytes, field: str, named: str) -> None:
    res = check_record(7, log_line("ext-1", value, field), mapping=GENERIC)
    assert res.trace is None and res.reason is not None and res.request_id == "ext-1"
    assert res.reason.startswith(f"invalid trace: {named}: {FINITE}"), res.reason
    assert "column" not in res.reason and "greater than" not in res.reason


def test_a_trace_as_routelens_writes_it_names_the_contract_field(factory: TraceFactory) -> None:
    doc = orjson.loads(factory.trace().model_dump_json())
    res = check_record(1, with_number(orjson.dumps(doc), "total_ms", b"1e400"))
    assert res.trace is None and res.reason is not None and res.request_id == doc["request_id"]
    assert res.reason == f"invalid trace: outcome.total_ms: {FINITE} (the store holds no infinity or NaN)"
    assert doc["candidates"], "the factory's traces have candidates"
    doc["latency_ms"] = float("nan")
    doc["candidates"][1]["total"] = float("-inf")
    res = check_record(2, json.dumps(doc).encode())  # Python's json writes NaN and -Infinity
    why = f"{FINITE} (the store holds no infinity or NaN)"
    assert res.reason == f"invalid trace: candidates.1.total: {why}; latency_ms: {why}"  # each, in the line's order


def test_a_field_the_mapping_ignores_is_named_as_the_line_writes_it() -> None:
    res = check_record(1, log_line("ext-1", b"NaN", "extra.ratio"), mapping=GENERIC)
    assert res.reason is not None and res.reason.startswith(f'invalid trace: extra.ratio: {FINITE}'), res.reason
    raw = orjson.dumps({"request_id": "ext-2", "ts": "2024-01-01T00:00:00Z", "prompt": "hi", "duration_ms": 3,
                        "metrics": {"ratios": [1.0]}}).replace(b"[1.0]", b"[1.0,NaN]")
    res = check_record(1, raw, mapping=GENERIC)
    assert res.reason is not None and res.reason.startswith(f"invalid trace: metrics.ratios.1: {FINITE}"), res.reason


@pytest.mark.parametrize("raw", [b'{"request_id":"x","duration_ms":12,}', b'{"a":NaN', b"\xff{}"])
def test_a_line_malformed_otherwise_keeps_the_parser_s_reason(raw: bytes) -> None:
    res = check_record(1, raw, mapping=GENERIC)
    assert res.trace is None and res.reason is not None and res.reason.startswith("malformed JSON: "), res.reason


@pytest.mark.parametrize("raw", [b"NaN", b"[1e400]"])
def test_a_line_that_is_no_object_says_so(raw: bytes) -> None:
    res = check_record(1, raw, mapping=GENERIC)
    assert res.reason is not None and res.reason.startswith("malformed JSON: "), res.reason


def test_ordinary_lines_never_reach_the_second_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    def no(*args: object, **kwargs: object) -> None:
        raise AssertionError("a good line was parsed twice")

    monkeypatch.setattr(json, "loads", no)
    res = check_record(1, log_line("ext-1", b"12.5"), mapping=GENERIC)
    assert res.trace is not None and res.trace.outcome.total_ms == 12.5


def test_a_json_array_refuses_only_its_items_that_hold_them() -> None:
    body = b"[" + b",".join([log_line("a-1", b"5"), log_line("a-2", b"NaN"), log_line("a-3", b"1e400")]) + b"]"
    results = [check_record(line, raw, mapping=GENERIC) for line, raw in split_records(body)]
    assert [r.line for r in results] == [1, 2, 3] and results[0].trace is not None
    for r in results[1:]:
        assert r.reason is not None and r.reason.startswith("invalid trace: outcome.total_ms (duration_ms in the line)")
    assert [r.request_id for r in results] == ["a-1", "a-2", "a-3"]
    assert dict(split_records(body))[1] == orjson.dumps(orjson.loads(log_line("a-1", b"5")))  # as orjson writes it


def test_the_http_intake_refuses_them_on_their_lines_naming_the_field(tmp_path: Path, factory: TraceFactory) -> None:
    good = [factory.trace() for _ in range(2)]
    raws = [orjson.dumps(orjson.loads(factory.trace().model_dump_json())) for _ in range(4)]
    bad = {
        2: (with_number(raws[0], "total_ms", b"1e400"), "outcome.total_ms"),
        3: (with_number(raws[1], "latency_ms", b"NaN"), "attempts.0.latency_ms"),  # the first one written
        4: (with_number(raws[2], "input_chars", b"-Infinity"), "features.input_chars"),
        5: (with_number(raws[3], "cost", b'"nan"'), "outcome.cost"),
    }

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        body = ndjson(good[0].model_dump_json().encode(), *(raw for raw, _ in bad.values()),
                      good[1].model_dump_json().encode())
        status, out = await call("POST", "/v1/traces", body)
        assert status == 207 and out["accepted"] == 2, out
        reasons = {r["line"]: r["reason"] for r in out["results"]["rejected"]}
        assert {line: reason.split(": ")[1] for line, reason in reasons.items()} == {
            line: field for line, (_, field) in bad.items()}
        assert all(f": {FINITE}" in reason and "column" not in reason for reason in reasons.values()), reasons
        assert em.flush(10)
        assert [store.get(t.request_id) for t in good] == good and store.count() == 2
        q = store.quarantined(T0 - timedelta(days=3650), T0 + timedelta(days=3650))
        assert sorted((r.line, r.source) for r in q) == [(line, "intake") for line in sorted(bad)]
        assert all(r.request_id is not None for r in q)

    serve(tmp_path, check)


def test_the_file_import_refuses_them_on_their_lines_and_stores_the_rest(
        tmp_path: Path, decoder: str, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "ext.jsonl"
    lines = [log_line("ext-1", b"12"), log_line("ext-2", b"1e400"), log_line("ext-3", b"NaN"),
             log_line("ext-4", b"Infinity"), log_line("ext-5", b'"nan"'), log_line("ext-6", b'"inf"', "cost"),
             log_line("ext-7", b"3.5")]
    src.write_bytes(b"\n".join(lines) + b"\n")
    db = tmp_path / "X.duckdb"
    assert main(["ingest", "import", str(src), "--mapping", "generic", "--db", str(db)]) == 1
    assert "lines 7  accepted 2  rejected 5  stored 2" in capsys.readouterr().out
    store = DuckDBTraceStore(db, read_only=True)
    kept = [store.get(f"ext-{i}") for i in (1, 7)]
    assert store.count() == 2 and [t.outcome.total_ms for t in kept if t is not None] == [12.0, 3.5]
    reasons = {r.line: r.reason for r in store.quarantined(T0 - timedelta(days=3650), T0 + timedelta(days=3650))}
    store.close()
    assert set(reasons) == {2, 3, 4, 5, 6}
    for line in (2, 3, 4):
        assert reasons[line].startswith(f"invalid trace: outcome.total_ms (duration_ms in the line): {FINITE}")
    assert reasons[5] == f"invalid trace: outcome.total_ms: {FINITE}"
    assert reasons[6].startswith(f"invalid trace: outcome.cost: {FINITE}")
