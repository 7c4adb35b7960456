"""The policy step's ``waited_s`` (how long a throttled request queued for a token) in the DuckDB store.

A file written before the field existed holds ``policy`` structs without it: opened read-only it
reads as it is, opened for writing it is migrated, and either way its traces read ``waited_s`` None
(never recorded), beside new traces that carry the time waited. A spooled trace from an older
gateway (no ``waited_s`` key) reads the same on the C decoder's fast path.
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
from schemas.trace_policy import ClauseTried, PolicyStep
from tests.factories import make_trace
from tests.ingest.duckdb.test_older_file_store import make_older


def waited(request_id: str, throttled: str, waited_s: float | None) -> DecisionTrace:
    """A trace whose rule's throttle made it wait ``waited_s`` (``throttled``: what came of it)."""
    step = PolicyStep(policy="p.yaml sha256:0123", rule="to-n", tried=[ClauseTried(rule="to-n", matched=True)],
                      target="n", throttled=throttled, waited_s=waited_s)  # type: ignore[arg-type]
    return make_trace(request_id).model_copy(update={"policy": step, "rule": "to-n"})


@pytest.fixture
def older(tmp_path: Path) -> tuple[Path, list[DecisionTrace]]:
    """A file of two throttled traces, its ``policy`` structs without ``waited_s`` (as before the field)."""
    path = tmp_path / "older.duckdb"
    traces = [waited("req_waited", "wait", 0.42), waited("req_ran_out", "reject", 1.0)]
    store = DuckDBTraceStore(path)
    store.write_records(traces)
    store.close()
    make_older(path, {"traces": ["policy.waited_s"]}, rollup=True)
    con = duckdb.connect(str(path), read_only=True, config=dict(OFFLINE))
    try:
        fields = con.sql("SELECT policy FROM traces LIMIT 0").to_arrow_table().schema.field("policy").type
        assert "waited_s" not in [f.name for f in fields] and "throttled" in [f.name for f in fields]
    finally:
        con.close()
    return path, traces


def as_before(t: DecisionTrace) -> DecisionTrace:
    assert t.policy is not None
    return t.model_copy(update={"policy": t.policy.model_copy(update={"waited_s": None})})


def test_an_older_file_read_only_reads_waited_s_as_not_recorded(older: tuple[Path, list[DecisionTrace]]) -> None:
    path, traces = older
    store = DuckDBTraceStore(path, read_only=True)
    try:
        for t in traces:
            got = store.get(t.request_id)
            assert got == as_before(t) and got.policy is not None and got.policy.waited_s is None
            assert got.policy.throttled == t.policy.throttled  # type: ignore[union-attr]
    finally:
        store.close()


def test_an_older_file_is_migrated_and_keeps_its_traces_beside_new_ones(
        older: tuple[Path, list[DecisionTrace]]) -> None:
    path, traces = older
    store = DuckDBTraceStore(path)  # a writing open migrates: the policy struct gains waited_s
    try:
        new = waited("req_new", "wait", 0.25)
        store.write_records([new])
        assert [store.get(t.request_id) for t in traces] == [as_before(t) for t in traces]
        got = store.get("req_new")
        assert got == new and got is not None and got.policy is not None and got.policy.waited_s == 0.25
    finally:
        store.close()
    con = duckdb.connect(str(path), read_only=True, config=dict(OFFLINE))
    try:
        rows = con.execute("SELECT request_id, policy.waited_s FROM traces ORDER BY request_id").fetchall()
        assert rows == [("req_new", 0.25), ("req_ran_out", None), ("req_waited", None)]
        applied = [s for (s,) in con.execute("SELECT statement FROM routelens_migrations").fetchall()]
        assert any("policy" in s and "waited_s" in s for s in applied), applied
    finally:
        con.close()


def test_a_spooled_trace_without_the_key_reads_waited_s_none_on_the_fast_path() -> None:
    if not fast_decoder.AVAILABLE:
        pytest.skip("the C decoder is not built")
    payload = next(p for k, p in Encoder().encode(waited("req_w", "wait", 0.42)) if k is Kind.TRACE)
    before = payload.replace(b',"waited_s":0.42', b"")
    assert b'"waited_s":0.42' in payload and b"waited_s" not in before
    decoder = fast_decoder.decoder_for(parse_schema(Kind.TRACE))
    assert decoder is not None
    table = decoder.decode([payload, before])
    assert table is not None, "the fast path declined a trace with waited_s"
    assert [row["waited_s"] for row in table.column("policy").to_pylist()] == [0.42, None]
