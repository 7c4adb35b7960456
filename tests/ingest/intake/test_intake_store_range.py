"""Numbers no store holds (an integer beyond 64 bits, an infinite float) are refused on their line at intake.

Found by an audit of losing nothing: ``"http_status": 18446744073709551615`` was accepted by
``POST /v1/traces`` and by ``routelens ingest import``, then quarantined by the sink without its
line; a cost of ``"inf"`` was stored as null (lost), and a total of ``"Infinity"`` was stored as
null too, a trace that no longer reads back (its lookup failed).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.cli import main
from bench.synthetic import T0, TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.intake.lines import check_record
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.stats import STORE
from schemas.trace import DecisionTrace
from tests.ingest.http_api.test_routes import Call, ndjson, serve


def with_outcome(trace: DecisionTrace, rid: str, **outcome: Any) -> dict[str, Any]:
    doc = orjson.loads(trace.model_dump_json())
    return {**doc, "request_id": rid, "outcome": {**doc["outcome"], **outcome}}


def with_features(trace: DecisionTrace, rid: str, **features: Any) -> dict[str, Any]:
    doc = orjson.loads(trace.model_dump_json())
    return {**doc, "request_id": rid, "features": {**doc["features"], **features}}


def dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


# line -> (record, the field its reason must name)
def bad_lines(factory: TraceFactory) -> dict[int, tuple[bytes, str]]:
    t = factory.trace()
    return {  # written by the standard library: orjson writes no integer beyond 64 bits
        2: (dumps(with_outcome(t, "r_u64", http_status=18446744073709551615)), "outcome.http_status"),
        3: (dumps(with_features(t, "r_i64", n_messages=2**63)), "features.n_messages"),
        4: (dumps(with_outcome(t, "r_neg", http_status=-(2**63) - 1)), "outcome.http_status"),
        5: (dumps(with_outcome(t, "r_exp", prompt_tokens=9.3e18)), "outcome.prompt_tokens"),
        6: (dumps(with_outcome(t, "r_inf", cost="inf")), "outcome.cost"),
        7: (dumps(with_outcome(t, "r_Inf", total_ms="Infinity")), "outcome.total_ms"),
        8: (dumps(with_outcome(t, "r_big", ttft_ms="1e400")), "outcome.ttft_ms"),
    }


def test_the_http_intake_refuses_them_on_their_line_naming_the_field(tmp_path: Path, factory: TraceFactory) -> None:
    good = [factory.trace() for _ in range(2)]
    bad = bad_lines(factory)
    body = ndjson(good[0].model_dump_json().encode(), *(raw for raw, _ in bad.values()),
                  good[1].model_dump_json().encode())

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        status, out = await call("POST", "/v1/traces", body)
        assert status == 207 and out["accepted"] == 2, out
        reasons = {r["line"]: r["reason"] for r in out["results"]["rejected"]}
        assert set(reasons) == set(bad)
        for line, (_, field) in bad.items():
            assert reasons[line].startswith(f"invalid trace: {field}: "), reasons[line]
        assert "18446744073709551615" not in reasons[2]  # a reason names the field, never the value
        assert em.flush(10)
        assert [store.get(t.request_id) for t in good] == good and store.count() == 2
        assert em.stats.sinks[STORE].rejected == 0  # nothing reached the sink to be refused there, lineless
        q = store.quarantined(T0, T0 + timedelta(seconds=1))
        assert sorted(r.line for r in q if r.source == "intake") == sorted(bad)

    serve(tmp_path, check)


def test_the_file_import_refuses_them_on_their_line(tmp_path: Path, factory: TraceFactory,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    good = factory.trace()
    bad = bad_lines(factory)
    src = tmp_path / "t.jsonl"
    src.write_bytes(b"\n".join([good.model_dump_json().encode(), *(raw for raw, _ in bad.values())]) + b"\n")
    db = tmp_path / "t.duckdb"
    assert main(["ingest", "import", str(src), "--db", str(db)]) == 1
    assert f"lines 8  accepted 1  rejected {len(bad)}  stored 1" in capsys.readouterr().out
    store = DuckDBTraceStore(db, read_only=True)
    assert store.count() == 1 and store.get(good.request_id) == good
    by_line = {r.line: r.reason for r in store.quarantined(T0 - timedelta(days=3650), T0 + timedelta(days=3650))}
    store.close()
    assert {line: field for line, (_, field) in bad.items()} == {
        line: reason.split(": ")[1] for line, reason in by_line.items()}


def test_a_parquet_nan_or_infinity_is_refused_not_stored_as_null(tmp_path: Path, factory: TraceFactory,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    traces = [factory.trace() for _ in range(3)]
    rows = [orjson.loads(t.model_dump_json()) for t in traces]
    rows[0]["outcome"]["cost"], rows[1]["outcome"]["ttft_ms"] = float("nan"), float("inf")
    rows[2]["outcome"]["cost"] = 0.25
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    db = tmp_path / "t.duckdb"
    assert main(["ingest", "import", str(tmp_path / "t.parquet"), "--db", str(db)]) == 1
    assert "lines 3  accepted 1  rejected 2" in capsys.readouterr().out
    store = DuckDBTraceStore(db, read_only=True)
    assert store.get(traces[0].request_id) is None and store.get(traces[1].request_id) is None
    kept = store.get(traces[2].request_id)
    assert kept is not None and kept.outcome.cost == 0.25
    reasons = {r.line: r.reason for r in store.quarantined(T0 - timedelta(days=3650), T0 + timedelta(days=3650))}
    store.close()
    assert "outcome.cost" in reasons[1] and "outcome.ttft_ms" in reasons[2]


@pytest.mark.parametrize("ts", [b"1e300", b"100000000000000000000000000000", b"-5e15"])
def test_a_mapped_epoch_no_date_holds_is_a_refused_line_not_a_crash(ts: bytes) -> None:
    from ingest.intake.field_mapping import GENERIC

    raw = b'{"id": "x-1", "timestamp": ' + ts + b', "duration_ms": 5, "prompt": "hi"}'
    res = check_record(3, raw, mapping=GENERIC)
    assert res.trace is None and res.request_id == "x-1" and res.reason is not None
    assert res.reason.startswith("invalid trace: ts: "), res.reason


def test_ordinary_numbers_pass_and_the_check_is_not_fooled_by_words(factory: TraceFactory) -> None:
    t = factory.trace(rule="inference-info", selected_instance="nano-1")
    doc = with_outcome(t, t.request_id, cost=1.5e-05, total_ms=1e15, http_status=2**63 - 1)
    res = check_record(1, orjson.dumps(doc))
    assert res.trace is not None and res.reason is None
    assert res.trace.outcome.http_status == 2**63 - 1
