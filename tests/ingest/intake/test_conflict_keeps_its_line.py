"""A line the store refuses (a different trace holds its ``request_id``) is quarantined with its source and line.

Found by an audit of ``routelens ingest import``: every line refused at intake said ``import:FILE
line N``, but one conflicting with a trace already stored said ``quarantined a trace from sink``,
and its quarantine record held ``"source":"sink","line":null``: the file's line was lost. The same
held for ``POST /v1/traces`` (``tests/ingest/intake/test_intake_conflicting_ids.py`` checks it there).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.cli import main
from bench.synthetic import T0, TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.intake.file_import import import_file
from ingest.kinds import Kind
from ingest.pipeline.batcher import Batcher
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.origins import Origins
from ingest.pipeline.quarantine import Quarantine
from schemas.config.storage import StorageSettings

CONFLICT = "request_id 'ext-2' already stored with different content"
FOREVER = (T0 - timedelta(days=3650), T0 + timedelta(days=3650))


def log_line(rid: str, model: str = "m") -> bytes:  # another router's log line (the generic mapping)
    return orjson.dumps({"request_id": rid, "ts": "2024-01-01T00:00:00Z", "model": model, "prompt": "hi",
                         "duration_ms": 12})


def test_the_import_quarantines_a_conflicting_line_with_its_file_and_line(
        tmp_path: Path, decoder: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "X.duckdb"
    first = tmp_path / "a.jsonl"
    first.write_bytes(log_line("ext-1") + b"\n" + log_line("ext-2") + b"\n")
    assert main(["ingest", "import", str(first), "--mapping", "generic", "--db", str(db)]) == 0
    capsys.readouterr()
    dup = tmp_path / "dup.jsonl"  # ext-2 under another model twice (lines 3 and 5), a malformed line between
    dup.write_bytes(b"\n".join([log_line("ext-3"), b"", log_line("ext-2", "m2"), b"{oops", log_line("ext-2", "m2"),
                                log_line("ext-1")]) + b"\n")
    assert main(["ingest", "import", str(dup), "--mapping", "generic", "--db", str(db)]) == 1
    out = capsys.readouterr()
    assert "lines 5  accepted 4  rejected 1  stored 1  already stored 1  refused by the store 2" in out.out
    logged = [m for m in caplog.messages if m.startswith("quarantined")]  # stderr's lines
    assert f"quarantined a trace from import:dup.jsonl line 3: {CONFLICT}" in logged
    assert f"quarantined a trace from import:dup.jsonl line 5: {CONFLICT}" in logged
    assert not [m for m in logged if "from sink" in m]
    store = DuckDBTraceStore(db, read_only=True)
    table = sorted((r.source, r.line, r.request_id, r.reason.startswith("malformed JSON")
                    if r.line == 4 else r.reason) for r in store.quarantined(*FOREVER))
    stored = store.get("ext-2")
    store.close()
    assert table == [("import:dup.jsonl", 3, "ext-2", CONFLICT), ("import:dup.jsonl", 4, None, True),
                     ("import:dup.jsonl", 5, "ext-2", CONFLICT)]
    assert stored is not None and stored.selected_model == "m"  # the trace stored first stays
    (day_file,) = (tmp_path / "X.duckdb.quarantine").glob("quarantine-*.jsonl")  # the file written at once
    filed = [orjson.loads(row) for row in day_file.read_bytes().splitlines()]
    assert sorted((r["source"], r["line"]) for r in filed) == [("import:dup.jsonl", n) for n in (3, 4, 5)]


def test_an_import_leaves_no_origin_behind(tmp_path: Path, factory: TraceFactory) -> None:
    """The origins of the lines taken are forgotten as the store takes or refuses them: none is held after."""
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    traces = list(factory.traces(30))
    store.write_records(traces[:10])
    changed = [t.model_copy(update={"rule": "another-rule"}) for t in traces[:3]]
    src = tmp_path / "t.jsonl"
    src.write_bytes(b"\n".join(t.model_dump_json().encode() for t in [*traces, *changed]) + b"\n")
    em = TraceEmitter(store, StorageSettings(batch_size=8, flush_interval_ms=5),
                      quarantine=Quarantine(None, clock=lambda: T0)).start()
    try:
        report = import_file(src, em)
        assert (report.stored, report.duplicates, report.refused_by_store) == (20, 10, 3)
        assert len(em.batcher.origins) == 0
        assert em.flush(10)
        rows = store.quarantined(*FOREVER)
        assert sorted(r.line or 0 for r in rows) == [31, 32, 33] and {r.source for r in rows} == {"import:t.jsonl"}
    finally:
        em.close()


def payload(rid: str, model: str) -> bytes:
    return b'{"schema_version":2,"request_id":"' + rid.encode() + b'","selected_model":"' + model.encode() + b'"}'


def at(source: str, line: int) -> dict[str, str | int]:
    return {"source": source, "line": line}


def test_origins_settle_each_frame_once_and_in_order() -> None:
    origins = Origins()
    for line, rid in enumerate(["a", "b", "a", "a"], 1):
        origins.add(rid, "import:f", line)
    same = payload("a", "x")
    frames = [(0, int(Kind.TRACE), same), (1, int(Kind.TRACE), payload("b", "y")), (2, int(Kind.SNAPSHOT), b"{}"),
              (3, int(Kind.TRACE), same)]
    settled = origins.settle(frames)
    assert len(origins) == 1  # the fourth line's trace is not in this write
    assert settled.of(same) == at("import:f", 1) and settled.of(same) == at("import:f", 3)  # equal bytes: in turn
    assert settled.of(same) == {} and settled.of(payload("b", "y")) == at("import:f", 2)
    assert settled.of(payload("c", "z")) == {}


def test_origins_are_bounded_and_an_unemitted_one_is_discarded() -> None:
    origins = Origins(cap=3)
    tokens = [origins.add(f"r{i}", "intake", i) for i in range(5)]
    assert len(origins) == 3  # the two oldest forgotten
    origins.discard(tokens[4])
    origins.discard(tokens[0])  # already forgotten: nothing happens
    frames = [(i, int(Kind.TRACE), payload(f"r{i}", "m")) for i in range(5)]
    settled = origins.settle(frames)
    assert [settled.of(p) for _, _, p in frames] == [{}, {}, at("intake", 2), at("intake", 3), {}]
    assert len(origins) == 0


def test_a_refusal_without_an_origin_is_quarantined_as_the_sink_s(tmp_path: Path, factory: TraceFactory) -> None:
    """The gateway's own traces hold no origin: the reject call is the one it always was (three arguments)."""
    calls: list[tuple[Any, ...]] = []
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    t = factory.trace()
    store.write_records([t])
    em = TraceEmitter(store, StorageSettings(batch_size=8, flush_interval_ms=5)).start()
    batcher: Batcher = em.batcher
    batcher._reject = lambda *args, **kwargs: calls.append((*args, kwargs))
    try:
        em.emit(t.model_copy(update={"rule": "another-rule"}))
        assert em.flush(10)
    finally:
        em.close()
    assert [(c[0], c[2], c[3]) for c in calls] == [(Kind.TRACE, f"request_id {t.request_id!r} already stored "
                                                    "with different content", {})]
