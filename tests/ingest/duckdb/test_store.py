from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from app.run.storage import open_store
from bench.synthetic import TraceFactory
from ingest.codec.storage_schema import storage_schema, strip_not_null
from ingest.duckdb.derived import DERIVED
from ingest.duckdb.schema import STORAGE_VERSION, ensure_schema
from ingest.duckdb.store import DuckDBTraceStore
from ingest.errors import SinkUnavailable
from ingest.kinds import Kind
from schemas import Feedback, ProbeKind, ProbeResult
from schemas.config.storage import StorageSettings
from schemas.derive import arrow_schema
from schemas.version import SCHEMA_VERSION
from tests.duckdb_lock import duckdb_held_elsewhere
from tests.factories import make_trace


def test_round_trip_through_a_real_file(tmp_path: Path, factory: TraceFactory) -> None:
    path = tmp_path / "sub" / "traces.duckdb"
    store = DuckDBTraceStore(path)
    traces = list(factory.traces(5)) + [make_trace("req_legacy_factory")]
    assert store.write_records(traces).by_kind[Kind.TRACE] == [6, 0]
    assert store.count() == 6 and store.get(traces[1].request_id) == traces[1]
    assert store.get("req_legacy_factory") == traces[-1] and store.get("req_unknown") is None
    store.close()
    ro = DuckDBTraceStore(path, read_only=True)
    got = ro.get(traces[2].request_id)
    assert got == traces[2] and got is not None and got.candidates[0].state is not None
    ro.close()


def test_a_record_delivered_twice_is_stored_once(tmp_path: Path, factory: TraceFactory) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    traces = list(factory.traces(4))
    store.write_records(traces[:2])
    again = store.write_records(traces)
    assert again.by_kind[Kind.TRACE] == [2, 2] and store.count() == 4
    store.close()


def test_the_wal_is_checkpointed_into_the_file_when_the_pipeline_is_idle(tmp_path: Path,
                                                                          factory: TraceFactory) -> None:
    path = tmp_path / "t.duckdb"
    store = DuckDBTraceStore(path, idle_checkpoint_bytes=1 << 40)
    traces = list(factory.traces(20))
    store.write_records(traces)
    wal = Path(f"{path}.wal")
    size = wal.stat().st_size
    store.idle()  # less WAL than the threshold: left for later
    assert wal.stat().st_size == size > 0
    store.idle_checkpoint_bytes = size
    store.idle()
    assert not wal.exists() or wal.stat().st_size < size
    store.close()
    ro = DuckDBTraceStore(path, read_only=True)
    assert ro.count() == 20 and ro.get(traces[7].request_id) == traces[7]
    ro.close()


def test_sql_looking_ids_are_parameters(tmp_path: Path, factory: TraceFactory) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.write_records([factory.trace(request_id="req_a")])
    assert store.get("req_a' OR '1'='1") is None
    evil = "x'); DROP TABLE traces; --"
    store.write_records([factory.trace(request_id=evil)])
    got = store.get(evil)
    assert got is not None and got.request_id == evil and store.count() == 2
    store.close()


def test_tables_views_and_version_are_derived_from_the_models(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    DuckDBTraceStore(path).close()
    con = duckdb.connect(str(path), read_only=True)
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    cols = [r[0] for r in con.execute("DESCRIBE traces").fetchall()]
    meta = dict(con.execute("SELECT key, value FROM routelens_meta").fetchall())
    con.close()
    assert {"traces", "instance_snapshots", "probe_results", "router_events", "feedback", "quarantine"} <= tables
    assert {"trace_candidates", "trace_steps", "trace_attempts", "trace_candidate_states"} <= views
    assert cols == [f.name for f in storage_schema(Kind.TRACE)] + [c for c, _, _ in DERIVED["traces"]]
    assert cols[:3] == [f.name for f in arrow_schema()][:3] and cols[-1 - len(DERIVED["traces"])] == "detail"
    assert meta == {"schema_version": str(SCHEMA_VERSION), "storage_version": str(STORAGE_VERSION)}


def test_the_flattened_views_have_one_row_per_candidate_step_and_attempt(tmp_path: Path,
                                                                        factory: TraceFactory) -> None:
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    traces = list(factory.traces(6))
    store.write_records(traces)
    store.close()
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    n = {v: con.execute(f"SELECT count(*) FROM {v}").fetchall()[0][0]
         for v in ("trace_candidates", "trace_steps", "trace_attempts", "trace_candidate_states")}
    kv = con.execute("SELECT kv_cache_usage FROM trace_candidate_states WHERE request_id = ? AND ordinal = 2",
                     [traces[0].request_id]).fetchall()
    con.close()
    assert n["trace_candidates"] == n["trace_candidate_states"] == sum(len(t.candidates) for t in traces)
    assert n["trace_steps"] == sum(len(t.decision_trace) for t in traces)
    assert n["trace_attempts"] == sum(len(t.attempts) for t in traces)
    assert kv == [(traces[0].candidates[1].state.kv_cache_usage,)]  # type: ignore[union-attr]


def test_a_model_that_gained_fields_migrates_the_table_and_keeps_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    old = strip_not_null(storage_schema(Kind.PROBE)).remove(storage_schema(Kind.PROBE).get_field_index("baseline"))
    row = {"probe_id": "p1", "ts": datetime(2026, 11, 1, tzinfo=UTC), "instance": "i", "model": "m",
           "kind": "latency", "verdict": "ok", "value": 12.0, "threshold": 50.0, "latency_ms": 12.0, "reason": "",
           "error_class": None, "reference": None}
    old_rows = pa.Table.from_pylist([row], schema=old)  # noqa: F841
    con.execute("CREATE TABLE probe_results AS SELECT * FROM old_rows")
    applied = ensure_schema(con)
    con.close()
    assert any("ADD COLUMN \"baseline\"" in s for s in applied)
    store = DuckDBTraceStore(path)
    got = store.probe_timeline(datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    store.close()
    assert got == [ProbeResult(probe_id="p1", ts=row["ts"], instance="i", model="m", kind=ProbeKind.LATENCY,
                               verdict="ok", value=12.0, threshold=50.0, latency_ms=12.0)]


def test_layout_1_with_inline_states_is_upgraded(tmp_path: Path, factory: TraceFactory) -> None:
    path = tmp_path / "v1.duckdb"
    traces = list(factory.traces(3))
    v1 = pa.schema([f for f in arrow_schema()])
    con = duckdb.connect(str(path))
    v1_rows = pa.Table.from_pylist([t.model_dump() for t in traces], schema=v1)  # noqa: F841
    con.execute("CREATE TABLE traces AS SELECT * FROM v1_rows")
    con.execute("CREATE INDEX traces_request_id ON traces (request_id)")
    con.close()
    store = DuckDBTraceStore(path)
    assert [store.get(t.request_id) for t in traces] == traces
    store.close()


def test_retention_deletes_by_age(tmp_path: Path) -> None:
    now = datetime(2026, 11, 20, tzinfo=UTC)
    old, new = TraceFactory(seed=1, start=now - timedelta(days=40)), TraceFactory(seed=2, start=now - timedelta(days=1))
    store = DuckDBTraceStore(tmp_path / "t.duckdb", retention_days=30, clock=lambda: now)
    store.write_records([*old.traces(3), *new.traces(2)])
    store.write_records([Feedback(request_id="r", ts=now - timedelta(days=31), correct=True)])
    store.apply_retention()
    assert store.count() == 2 and store.count(Kind.FEEDBACK) == 0
    store.close()


def test_a_file_another_process_writes_is_unavailable_not_a_crash(tmp_path: Path, factory: TraceFactory) -> None:
    path = tmp_path / "t.duckdb"
    DuckDBTraceStore(path).close()
    with duckdb_held_elsewhere(path):
        with pytest.raises(SinkUnavailable, match="cannot open"):
            DuckDBTraceStore(path, read_only=True)
        lazy = DuckDBTraceStore(path, lazy=True)  # the server starts anyway and spools
        with pytest.raises(SinkUnavailable):
            lazy.write_records([factory.trace()])
    assert lazy.write_records([factory.trace()]).stored >= 1  # free again once the writer is gone
    lazy.close()


def test_a_candidate_s_draw_probability_round_trips_on_the_fast_path(tmp_path: Path) -> None:
    """``CandidateEval.probability``, a nullable float: the C decoder reads it, DuckDB keeps it, old records lack it."""
    from ingest.codec import fast_decoder
    from ingest.codec.encoder import Encoder
    from ingest.codec.to_arrow import parse_schema

    base = make_trace("req_sampled")
    drawn = base.model_copy(update={"candidates": [
        base.candidates[0].model_copy(update={"probability": None}),
        base.candidates[1].model_copy(update={"probability": 0.625})]})
    payload = next(p for k, p in Encoder().encode(drawn) if k is Kind.TRACE)
    older = payload.replace(b',"probability":null', b"").replace(b',"probability":0.625', b"")
    assert payload.count(b"\"probability\"") == 2 and b"\"probability\"" not in older
    if fast_decoder.AVAILABLE:
        decoder = fast_decoder.decoder_for(parse_schema(Kind.TRACE))
        assert decoder is not None
        table = decoder.decode([payload, older])
        assert table is not None, "the fast path declined a trace with candidate probabilities"
        assert [[c["probability"] for c in row] for row in table.column("candidates").to_pylist()] == [
            [None, 0.625], [None, None]]
    store = DuckDBTraceStore(tmp_path / "p.duckdb")
    store.write_records([drawn, make_trace("req_deterministic")])
    got = store.get("req_sampled")
    assert got == drawn and got is not None and [c.probability for c in got.candidates] == [None, 0.625]
    assert [c.probability for c in store.get("req_deterministic").candidates] == [None, None]  # type: ignore[union-attr]
    store.close()


def test_the_configured_memory_limit_reaches_duckdb_and_the_default_bounds_the_writing_store(tmp_path: Path) -> None:
    # the store as the server opens it (app.run.storage.open_store), with the shipped default
    def limit(store: DuckDBTraceStore) -> str:
        ((value,),) = store._connect().execute("SELECT current_setting('memory_limit')").fetchall()
        return str(value)

    store = DuckDBTraceStore(tmp_path / "a.duckdb", memory_limit="256MiB")
    assert limit(store) == "256.0 MiB"
    store.close()
    served = open_store(StorageSettings(), str(tmp_path / "b.duckdb"))
    assert isinstance(served, DuckDBTraceStore) and limit(served) == "953.6 MiB"  # 1GB, DuckDB's reading of it
    served.close()
    unbounded = open_store(StorageSettings(duckdb_memory_limit=None), str(tmp_path / "c.duckdb"))
    assert isinstance(unbounded, DuckDBTraceStore) and limit(unbounded) not in ("953.6 MiB", "256.0 MiB")
    unbounded.close()
    with pytest.raises(ValueError, match="duckdb_memory_limit"):
        StorageSettings(duckdb_memory_limit="lots")


def test_every_record_table_has_its_unique_id_index_and_a_reopened_store_migrates_nothing(
        tmp_path: Path, factory: TraceFactory) -> None:
    # Without the index on policies, each open deduplicated them and logged it as a migration.
    from ingest.kinds import KINDS

    path = tmp_path / "t.duckdb"
    store = DuckDBTraceStore(path)
    store.write_records(list(factory.traces(2)))
    store.close()
    DuckDBTraceStore(path).close()
    con = duckdb.connect(str(path), read_only=True)
    unique = {r[0] for r in con.execute("SELECT table_name FROM duckdb_indexes() WHERE is_unique").fetchall()}
    migrations = con.execute("SELECT count(*) FROM routelens_migrations").fetchone()
    con.close()
    assert {info.table for info in KINDS.values()} <= unique
    assert migrations == (0,)
