"""A different trace under a ``request_id`` already stored is quarantined, not counted a duplicate.

Found by an audit of losing nothing: the stores counted any record whose id they held as a
duplicate (a re-delivery), so a second, different trace sent under a taken id was dropped
silently. A re-delivery of the same trace stays a counted duplicate (idempotent, silent).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import duckdb
import orjson
import pytest

from app.cli import main
from bench.synthetic import T0, TraceFactory
from ingest.codec.encoder import Encoder
from ingest.duckdb.store import DuckDBTraceStore
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.stats import STORE
from ingest.record_sink import batch_of, same_trace
from schemas.trace import DecisionTrace
from tests.ingest.elasticsearch.test_sink import es_store
from tests.ingest.es_contract.server import ContractServer
from tests.ingest.http_api.test_routes import Call, ndjson, serve


def conflict_reason(request_id: str) -> str:
    return f"request_id '{request_id}' already stored with different content"


def line(trace: DecisionTrace) -> bytes:
    return trace.model_dump_json().encode()


def test_the_intake_quarantines_a_different_trace_under_a_stored_id(tmp_path: Path, factory: TraceFactory) -> None:
    a, b = factory.trace(), factory.trace()
    other_b = b.model_copy(update={"rule": "another-rule"})
    c = factory.trace()
    other_c = c.model_copy(update={"selected_model": "another-model"})
    window = "start=" + quote(T0.isoformat()) + "&end=" + quote((T0 + timedelta(seconds=1)).isoformat())

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        assert (await call("POST", "/v1/traces", ndjson(line(a), line(b))))[1]["accepted"] == 2
        assert em.flush(10)
        # again: a as it was, b changed, then c twice with different content and once more as first sent
        status, out = await call("POST", "/v1/traces", ndjson(line(a), line(other_b), line(c), line(other_c), line(c)))
        assert status == 200 and out["accepted"] == 5  # the intake cannot know: the store decides
        assert em.flush(10)
        assert em.stats.stored(Kind.TRACE) == (3, 2)  # a, b, c written; a and c again: duplicates
        assert em.stats.sinks[STORE].rejected == 2 and em.stats.quarantined == 2
        assert store.get(b.request_id) == b and store.get(c.request_id) == c  # what was stored first stays
        assert em.flush(10)  # the quarantine records the sink's refusals emitted
        status, q = await call("GET", f"/v1/quarantine?{window}")
        assert status == 200
        got = sorted((r["request_id"], r["reason"], r["source"], r["line"]) for r in q["records"])
        # as from the body's lines (2 and 4 of the second request), like the intake's own refusals
        assert got == sorted([(b.request_id, conflict_reason(b.request_id), "intake", 2),
                              (c.request_id, conflict_reason(c.request_id), "intake", 4)])

    serve(tmp_path, check)


def test_the_same_trace_sampled_otherwise_is_a_duplicate(tmp_path: Path, factory: TraceFactory) -> None:
    """``storage.detail_share`` changed between two deliveries: its candidates' detail differs, the trace not."""
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    t = factory.trace()
    full, thin = Encoder(detail_share=1.0).encode(t), Encoder(detail_share=0.0).encode(t)
    assert full[-1][1] != thin[-1][1]
    assert store.write(store.prepare(batch_of(full))).by_kind[Kind.TRACE] == [1, 0]
    again = store.write(store.prepare(batch_of(thin)))
    assert again.by_kind[Kind.TRACE] == [0, 1] and again.rejected == []
    store.close()


def test_a_row_stored_before_a_column_existed_is_the_same_trace_again(tmp_path: Path, factory: TraceFactory) -> None:
    """Upgraded: the stored row has NULL where the new column's default stands in the same trace delivered again."""
    path = tmp_path / "t.duckdb"
    store = DuckDBTraceStore(path)
    t = factory.trace()
    assert store.write(store.prepare(batch_of(Encoder().encode(t)))).by_kind[Kind.TRACE] == [1, 0]
    store.close()
    con = duckdb.connect(str(path))
    con.execute("UPDATE traces SET arm_forced = NULL, mode = NULL")  # as the migration left an older row
    con.close()
    store = DuckDBTraceStore(path)
    again = store.write(store.prepare(batch_of(Encoder().encode(t))))
    assert again.by_kind[Kind.TRACE] == [0, 1] and again.rejected == []
    forced = t.model_copy(update={"arm_forced": True})  # not the default: another trace under the id
    other = store.write(store.prepare(batch_of(Encoder().encode(forced))))
    assert [r.reason for r in other.rejected] == [conflict_reason(t.request_id)]
    store.close()


def test_a_document_stored_before_a_field_existed_is_the_same_trace_again(factory: TraceFactory) -> None:
    """Elasticsearch's comparison: a stored document without a field reads as its default."""
    incoming = orjson.loads(Encoder().encode(factory.trace())[-1][1])
    stored = {k: v for k, v in incoming.items() if k not in ("arm_forced", "mode")}
    assert incoming["arm_forced"] is False and same_trace(stored, incoming)
    assert not same_trace(stored, {**incoming, "arm_forced": True})


def test_a_reimport_with_one_trace_changed_says_so_and_exits_1(tmp_path: Path, factory: TraceFactory,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    traces = [factory.trace() for _ in range(4)]
    src, db = tmp_path / "t.jsonl", tmp_path / "t.duckdb"
    src.write_bytes(b"\n".join(map(line, traces)) + b"\n")
    assert main(["ingest", "import", str(src), "--db", str(db)]) == 0
    assert main(["ingest", "import", str(src), "--db", str(db)]) == 0  # the same file again: duplicates only
    assert "stored 0  already stored 4\n" in capsys.readouterr().out
    traces[2] = traces[2].model_copy(update={"intent": "changed"})
    src.write_bytes(b"\n".join(map(line, traces)) + b"\n")
    assert main(["ingest", "import", str(src), "--db", str(db)]) == 1
    out = capsys.readouterr()
    assert "stored 0  already stored 3  refused by the store 1" in out.out and "quarantine" in out.err
    store = DuckDBTraceStore(db, read_only=True)
    kept = store.get(traces[2].request_id)
    reasons = [r.reason for r in store.quarantined(T0 - timedelta(days=3650), T0 + timedelta(days=3650))]
    store.close()
    assert kept is not None and kept.intent != "changed"
    assert reasons == [conflict_reason(traces[2].request_id)]


def test_elasticsearch_compares_on_a_409_and_quarantines_a_different_trace(es_server: ContractServer,
                                                                          factory: TraceFactory) -> None:
    store = es_store(es_server)
    traces = [factory.trace() for _ in range(3)]
    assert store.write_records(traces).by_kind[Kind.TRACE] == [3, 0]
    searches = sum(1 for _, p in es_server.requests if p.endswith("/_search"))
    changed = traces[1].model_copy(update={"rule": "another-rule"})
    new = factory.trace()
    other_new = new.model_copy(update={"rule": "another-rule"})
    result = store.write_records([traces[0], changed, new, other_new, new])
    assert result.by_kind[Kind.TRACE] == [1, 2]  # new stored; traces[0] and new again: duplicates
    assert sorted((r.kind, r.reason) for r in result.rejected) == sorted(
        [(Kind.TRACE, conflict_reason(traces[1].request_id)), (Kind.TRACE, conflict_reason(new.request_id))])
    assert es_server.engine.streams["routelens-traces"][traces[1].request_id]["rule"] == traces[1].rule
    assert sum(1 for _, p in es_server.requests if p.endswith("/_search")) == searches + 1  # one look, on the 409s
    store.write_records([factory.trace()])  # no 409: no search
    assert sum(1 for _, p in es_server.requests if p.endswith("/_search")) == searches + 1
    store.close()
