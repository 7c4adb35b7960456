"""One accepted trace must not stop trace storage for good (a ts outside the years, a record the sink fails on).

Each test runs the real parts: the intake (IngestApi on 127.0.0.1), the emitter and its batcher, and
a DuckDB file in tmp_path.
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import duckdb
import orjson
import pytest

from app.cli import main
from bench.synthetic import T0, TraceFactory, plain_of
from ingest.codec.encoder import Encoder
from ingest.codec.unchecked import CONTRACT_FROM
from ingest.duckdb.store import DuckDBTraceStore
from ingest.errors import SinkError
from ingest.kinds import Kind
from ingest.pipeline.batcher import FAULT_TRIES
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.quarantine import Quarantine
from ingest.record_sink import PreparedBatch, RecordBatch, WriteResult
from schemas.config.storage import SpoolSettings, StorageSettings
from schemas.records import QuarantinedRecord
from tests.ingest.http_api.test_routes import Call, ndjson, serve

# Each is a valid aware datetime in its own zone, and outside years 1-9999 once in UTC.
OUT_OF_YEARS = ["0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:30:00-01:00"]
WINDOW = (T0 - timedelta(days=1), T0 + timedelta(days=1))


def _settings() -> StorageSettings:
    return StorageSettings(batch_size=64, flush_interval_ms=5, spool=SpoolSettings(max_record_bytes=64 * 1024))


def _quarantined(store: DuckDBTraceStore) -> dict[str | None, QuarantinedRecord]:
    return {q.request_id: q for q in store.quarantined(*WINDOW)}


def test_intake_refuses_a_ts_outside_the_years_by_name_and_storage_goes_on(tmp_path: Path,
                                                                           factory: TraceFactory) -> None:
    """It was 200 ``accepted``; the store then retried the batch for ever and stored nothing after it."""
    good = [factory.trace() for _ in range(4)]
    bad = [orjson.loads(good[0].model_dump_json()) | {"request_id": f"req_bad{i}", "ts": ts}
           for i, ts in enumerate(OUT_OF_YEARS)]
    body = ndjson(good[0].model_dump_json().encode(), bad[0], good[1].model_dump_json().encode(), bad[1], bad[2],
                  good[2].model_dump_json().encode())

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        status, out = await call("POST", "/v1/traces", body, {"Content-Type": "application/x-ndjson"})
        assert (status, out["accepted"], out["rejected"]) == (207, 3, 3), out
        refused = {r["request_id"]: r["reason"] for r in out["results"]["rejected"]}
        assert set(refused) == {"req_bad0", "req_bad1", "req_bad2"}
        assert all(reason.startswith("invalid trace: ts: ") for reason in refused.values()), refused
        status, out = await call("POST", "/v1/traces", good[3].model_dump_json().encode())  # posted afterwards
        assert (status, out["accepted"]) == (200, 1)
        assert em.flush(20)
        assert [store.get(t.request_id) for t in good] == good
        quarantined = _quarantined(store)
        assert all(quarantined[rid].reason.startswith("invalid trace: ts: ") for rid in refused)

    serve(tmp_path, check)


def test_the_store_quarantines_an_unchecked_trace_outside_the_years_and_stores_the_rest(
        tmp_path: Path) -> None:
    """A gateway's unchecked traces (a batch checked on its Arrow columns) reach the store's own check."""
    encoder = Encoder()
    traces = list(TraceFactory(seed=21, n_candidates=3).traces(CONTRACT_FROM + 3))

    def unchecked(values: dict[str, object]) -> list[tuple[Kind, bytes]]:
        return [(k, p) for k, p in encoder.plain_trace(values)]

    records = [r for t in traces for r in unchecked(plain_of(t))]
    bad = [r for i, ts in enumerate(OUT_OF_YEARS)
           for r in unchecked(plain_of(traces[i]) | {"request_id": f"req_bad{i}", "ts": ts})]
    assert all(k in (Kind.SNAPSHOT, Kind.TRACE_UNCHECKED) for k, _ in bad)
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    em = TraceEmitter(store, _settings(), spool_dir=tmp_path / "spool",
                      quarantine=Quarantine(tmp_path / "q", clock=lambda: T0)).start()
    try:
        em.emit_encoded(records[:10] + bad + records[10:])
        assert em.flush(20)
        later = next(TraceFactory(seed=22, n_candidates=3).traces(1))
        em.emit_encoded(unchecked(plain_of(later)))
        assert em.flush(20)
        assert store.get(later.request_id) is not None
        assert all(store.get(t.request_id) is not None for t in traces)
        quarantined = _quarantined(store)
        for i in range(len(OUT_OF_YEARS)):
            assert store.get(f"req_bad{i}") is None
            assert "\nts\n" in quarantined[f"req_bad{i}"].reason, quarantined[f"req_bad{i}"].reason
    finally:
        em.close()
        store.close()


class FaultySink:
    """A real DuckDB store whose ``write`` (or ``prepare``) raises for any batch holding the poison trace."""

    def __init__(self, store: DuckDBTraceStore, poison: str, *, in_prepare: bool = False) -> None:
        self.store = store
        self.poison = f'"request_id":"{poison}"'.encode()
        self.in_prepare = in_prepare
        self.faults = 0

    def _check(self, batch: RecordBatch) -> None:
        traces = batch.payloads.get(Kind.TRACE, [])
        if any(self.poison in p for p in traces):
            self.faults += 1
            if self.in_prepare:
                raise ValueError("a parser bug this record sets off")
            raise TypeError("a bug this record sets off")

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        if self.in_prepare:
            self._check(batch)
        return self.store.prepare(batch)

    def write(self, prepared: PreparedBatch) -> WriteResult:
        if not self.in_prepare:
            self._check(prepared.batch)
        return self.store.write(prepared)

    def idle(self) -> None:
        self.store.idle()

    def close(self) -> None:
        self.store.close()


@pytest.mark.parametrize("in_prepare", [False, True], ids=["write", "prepare"])
def test_a_record_the_sink_fails_on_is_quarantined_after_bounded_tries_and_the_rest_stored(
        tmp_path: Path, factory: TraceFactory, in_prepare: bool) -> None:
    """It was retried for ever (write) or stopped the preparing thread (prepare): nothing was stored after it."""
    traces = [factory.trace() for _ in range(24)]
    poison = traces[13].request_id
    sink = FaultySink(DuckDBTraceStore(tmp_path / "t.duckdb"), poison, in_prepare=in_prepare)
    em = TraceEmitter(sink, _settings(), spool_dir=tmp_path / "spool", sleep=lambda s: None,
                      quarantine=Quarantine(tmp_path / "q", clock=lambda: T0)).start()
    try:
        for trace in traces:
            assert em.emit(trace)
        assert em.flush(20)
        later = factory.trace()
        assert em.emit(later)
        assert em.flush(20)
        store = sink.store
        assert [store.get(t.request_id) for t in [*traces, later] if t.request_id != poison] == \
            [t for t in [*traces, later] if t.request_id != poison]
        assert store.get(poison) is None
        quarantined = _quarantined(store)[poison]
        what = "ValueError: a parser bug" if in_prepare else "TypeError: a bug"
        assert quarantined.kind == "trace" and quarantined.source == "sink" and what in quarantined.reason
        assert em.stats.quarantined == 1
        # a few tries of the batch, one write per halving, a few of the record alone: not for ever
        assert sink.faults <= 2 * FAULT_TRIES + math.ceil(math.log2(len(traces))) + 1, sink.faults
    finally:
        em.close()


class BrokenStore(FaultySink):
    """A real DuckDB store that fails as a store (``SinkError``: it cannot open its file, say) a few times."""

    def __init__(self, store: DuckDBTraceStore, failures: int) -> None:
        super().__init__(store, "none")
        self.failures = failures

    def write(self, prepared: PreparedBatch) -> WriteResult:
        if self.failures:
            self.failures -= 1
            raise SinkError("cannot open the file")
        return self.store.write(prepared)


def test_a_store_failing_as_a_store_is_retried_not_split_or_quarantined(tmp_path: Path,
                                                                        factory: TraceFactory) -> None:
    traces = [factory.trace() for _ in range(8)]
    sink = BrokenStore(DuckDBTraceStore(tmp_path / "t.duckdb"), failures=3 * FAULT_TRIES)
    em = TraceEmitter(sink, _settings(), spool_dir=tmp_path / "spool", sleep=lambda s: None).start()
    try:
        for trace in traces:
            assert em.emit(trace)
        assert em.flush(20)
        assert [sink.store.get(t.request_id) for t in traces] == traces
        assert em.stats.quarantined == 0 and sink.failures == 0
    finally:
        em.close()


def _poisoned_file(path: Path, factory: TraceFactory) -> list[str]:
    """A store file holding a BC-era ts and a year-10000 one, as the intake let them through before.

    Nothing is sealed in it yet (as after the ``+14:00`` trace: its insert committed, the seal failed).
    """
    store = DuckDBTraceStore(path, clock=lambda: T0)  # T0: the factory's traces are not sealed yet
    traces = [factory.trace() for _ in range(6)]
    store.write_records(traces)
    store.close()
    con = duckdb.connect(str(path))
    try:
        con.execute("UPDATE traces SET ts = '0000-12-31 10:00:00+00'::TIMESTAMPTZ WHERE request_id = ?",
                    [traces[0].request_id])
        con.execute("UPDATE traces SET ts = '10000-01-01 00:30:00+00'::TIMESTAMPTZ WHERE request_id = ?",
                    [traces[1].request_id])
        assert con.execute("SELECT count(*) FROM routelens_meta WHERE key = 'rollup_through'").fetchall() == [(0,)]
        assert isinstance(con.execute("SELECT min(ts) FROM traces").fetchall()[0][0], str)  # '0001-12-31 (BC) ...'
    finally:
        con.close()
    return [t.request_id for t in traces]


def test_a_file_holding_a_ts_outside_the_years_opens_and_rolls_up_the_rest(tmp_path: Path,
                                                                           factory: TraceFactory) -> None:
    """It crashed at start (rollup: ``str.replace()`` on DuckDB's BC timestamp string)."""
    path = tmp_path / "t.duckdb"
    ids = _poisoned_file(path, factory)
    store = DuckDBTraceStore(path, clock=lambda: T0 + timedelta(hours=1))  # seals the closed minutes
    try:
        assert store.get(ids[2]) is not None
        late = factory.trace()  # older than the sealed minutes: rolled up with the batch
        assert store.write_records([late]).by_kind[Kind.TRACE] == [1, 0]
    finally:
        store.close()
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT sum(requests) FROM traffic_minutes").fetchall() == [(len(ids) - 2 + 1,)]
    finally:
        con.close()


def test_importing_into_a_file_holding_a_ts_outside_the_years_works(tmp_path: Path, factory: TraceFactory,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``routelens ingest import --db`` crashed at start with a traceback."""
    path = tmp_path / "t.duckdb"
    _poisoned_file(path, factory)
    src = tmp_path / "more.jsonl"
    src.write_bytes(b"\n".join(factory.trace().model_dump_json().encode() for _ in range(3)) + b"\n")
    assert main(["ingest", "import", str(src), "--db", str(path)]) == 0
    assert "accepted 3  rejected 0  stored 3" in capsys.readouterr().out


def test_a_store_whose_rollup_cannot_seal_still_opens_and_stores(tmp_path: Path, factory: TraceFactory) -> None:
    """Sealing minutes runs at open and after each commit; only DuckDB's own errors were caught there."""
    path = tmp_path / "t.duckdb"
    DuckDBTraceStore(path).close()
    con = duckdb.connect(str(path))
    try:
        con.execute("INSERT OR REPLACE INTO routelens_meta VALUES ('rollup_through', 'not a time')")
    finally:
        con.close()
    store = DuckDBTraceStore(path, clock=lambda: T0 + timedelta(hours=1))  # ValueError from the seal, before
    try:
        traces = [factory.trace() for _ in range(3)]
        # the seal after the commit fails again: the write stands
        assert store.write_records(traces).by_kind[Kind.TRACE] == [3, 0]
        assert [store.get(t.request_id) for t in traces] == traces
    finally:
        store.close()
