"""The intent verdict's ``waited_s`` (how long a query waited for the classifier's first fit) in the DuckDB store.

A file written before the field existed holds ``policy.intent`` structs without it: opened read-only it
reads as it is, opened for writing it is migrated, and either way its traces read ``waited_s`` None;
a spooled trace from an older gateway (no ``waited_s`` key in its intent) reads the same on the C
decoder's fast path.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ingest.codec import fast_decoder
from ingest.codec.encoder import Encoder
from ingest.codec.to_arrow import parse_schema
from ingest.duckdb.store import OFFLINE, DuckDBTraceStore
from ingest.kinds import Kind
from schemas.trace import DecisionTrace
from schemas.trace_policy import IntentVerdict, PolicyStep
from tests.factories import make_trace
from tests.ingest.duckdb.test_older_file_store import make_older


def classified(request_id: str, waited_s: float | None) -> DecisionTrace:
    """A trace whose intent waited ``waited_s`` for the first fit (None: it did not wait)."""
    intent = IntentVerdict(label="billing", nearest="billing", confidence=0.8, threshold=0.5, path="fast",
                           waited_s=waited_s)
    return make_trace(request_id).model_copy(update={"policy": PolicyStep(policy="p.yaml sha256:0123", intent=intent)})


def as_before(t: DecisionTrace) -> DecisionTrace:
    assert t.policy is not None and t.policy.intent is not None
    intent = t.policy.intent.model_copy(update={"waited_s": None})
    return t.model_copy(update={"policy": t.policy.model_copy(update={"intent": intent})})


@pytest.fixture
def older(tmp_path: Path) -> tuple[Path, list[DecisionTrace]]:
    """A file of two classified traces, their ``policy.intent`` structs without ``waited_s``."""
    path = tmp_path / "older.duckdb"
    traces = [classified("req_waited", 64.651), classified("req_not", None)]
    store = DuckDBTraceStore(path)
    store.write_records(traces)
    store.close()
    make_older(path, {"traces": ["policy.intent.waited_s"]}, rollup=True)
    con = duckdb.connect(str(path), read_only=True, config=dict(OFFLINE))
    try:
        step = con.sql("SELECT policy FROM traces LIMIT 0").to_arrow_table().schema.field("policy").type
        names = [f.name for f in step.field("intent").type]
        assert "waited_s" not in names and "cut_tokens" in names
    finally:
        con.close()
    return path, traces


def test_an_older_file_read_only_reads_the_wait_as_not_recorded(older: tuple[Path, list[DecisionTrace]]) -> None:
    path, traces = older
    store = DuckDBTraceStore(path, read_only=True)
    try:
        assert [store.get(t.request_id) for t in traces] == [as_before(t) for t in traces]
    finally:
        store.close()


def test_an_older_file_is_migrated_and_keeps_its_traces_beside_new_ones(
        older: tuple[Path, list[DecisionTrace]]) -> None:
    path, traces = older
    store = DuckDBTraceStore(path)  # a writing open migrates: the intent struct gains waited_s
    try:
        new = classified("req_new", 2.5)
        store.write_records([new])
        assert [store.get(t.request_id) for t in traces] == [as_before(t) for t in traces]
        assert store.get("req_new") == new
    finally:
        store.close()
    con = duckdb.connect(str(path), read_only=True, config=dict(OFFLINE))
    try:
        rows = con.execute("SELECT request_id, policy.intent.waited_s FROM traces ORDER BY request_id").fetchall()
        assert rows == [("req_new", 2.5), ("req_not", None), ("req_waited", None)]
    finally:
        con.close()


def test_a_spooled_trace_without_the_key_reads_the_wait_none_on_the_fast_path() -> None:
    if not fast_decoder.AVAILABLE:
        pytest.skip("the C decoder is not built")
    payload = next(p for k, p in Encoder().encode(classified("req_w", 1.25)) if k is Kind.TRACE)
    before = payload.replace(b',"waited_s":1.25', b"")
    assert b'"waited_s":1.25' in payload and before.count(b"waited_s") == payload.count(b"waited_s") - 1
    decoder = fast_decoder.decoder_for(parse_schema(Kind.TRACE))
    assert decoder is not None
    table = decoder.decode([payload, before])
    assert table is not None, "the fast path declined a trace with the intent's waited_s"
    assert [row["intent"]["waited_s"] for row in table.column("policy").to_pylist()] == [1.25, None]
