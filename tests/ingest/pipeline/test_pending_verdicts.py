"""Verdicts queued and not stored yet are known by request id, those a spool held at start-up included.

One verdict per request: the gateway asks its pipeline, then the store's, whether a request has a
verdict on its way (``TraceEmitter.pending_verdicts``). A verdict left in a spool by a crash (here:
a store that never took it, and a close that gave up) is found when the next pipeline opens that
spool, before its batcher replays it; it is forgotten once the batch that holds it is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import orjson
from pydantic import BaseModel

from bench.synthetic import TraceFactory
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.pending_verdicts import PendingVerdicts, spooled_verdicts
from schemas.config.storage import SpoolSettings, StorageSettings
from schemas.feedback import Feedback
from tests.ingest.pipeline.test_emitter import FlakySink
from tests.polling import wait_until

NOW = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
SEG = 64 * 1024


def verdict(request_id: str, correct: bool = True, minute: int = 0) -> Feedback:
    return Feedback(request_id=request_id, ts=NOW.replace(minute=minute), correct=correct)


def slow(flush_interval_ms: int = 3_600_000) -> StorageSettings:
    """A pipeline that writes once an hour unless flushed (small segments: several files in a test)."""
    return StorageSettings(flush_interval_ms=flush_interval_ms, batch_size=64,
                           spool=SpoolSettings(segment_bytes=SEG))


def leave_in_spool(folder: Path, records: Sequence[BaseModel]) -> None:
    """Spool ``records`` in ``folder`` and stop without delivering them (a store that never took them)."""
    emitter = TraceEmitter(FlakySink(down=True), slow(5), spool_dir=folder).start()
    for record in records:
        assert emitter.emit(record)
    emitter.close(timeout_s=0.3)
    assert emitter.stats.sinks["store"].delivered == 0


def test_a_verdict_is_pending_from_its_emit_until_its_batch_is_stored(tmp_path: Path) -> None:
    sink = FlakySink()
    emitter = TraceEmitter(sink, slow(), spool_dir=tmp_path / "spool").start()
    try:
        assert emitter.pending_verdicts("r1") == []
        emitter.emit(next(iter(TraceFactory(seed=3, n_candidates=2).traces(1))))
        emitter.emit(verdict("r1", correct=False))
        emitter.emit(verdict("r1", correct=True, minute=1))  # a second one: both wait (the store keeps one)
        assert [(v.request_id, v.correct) for v in emitter.pending_verdicts("r1") or []] == [("r1", False),
                                                                                          ("r1", True)]
        assert emitter.pending_verdicts("r2") == []
        assert emitter.replayed_verdicts == ()  # nothing was in the spool at its start
        assert emitter.flush(10)
        assert Kind.FEEDBACK in sink.kinds
        assert emitter.pending_verdicts("r1") == []  # stored: the store answers from now on
    finally:
        emitter.close()


def test_relayed_verdicts_are_pending_too(tmp_path: Path) -> None:
    emitter = TraceEmitter(FlakySink(), slow(), spool_dir=tmp_path / "spool").start()
    try:
        payload = orjson.dumps({**verdict("r7").model_dump(mode="json"), "feedback_id": "f7"})
        assert emitter.emit_encoded([(Kind.FEEDBACK, payload), (Kind.FEEDBACK, b'{"no": "id"}')]) == 2
        assert [v.request_id for v in emitter.pending_verdicts("r7") or []] == ["r7"]
        assert emitter.flush(10)
        assert emitter.pending_verdicts("r7") == []
    finally:
        emitter.close()


def test_verdicts_left_in_a_spool_are_found_at_the_next_start_and_forgotten_once_stored(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    factory = TraceFactory(seed=5, n_candidates=2)
    records: list[BaseModel] = []
    for i in range(60):  # traces and verdicts over several segment files
        records += [factory.trace(request_id=f"t{i}"), *([verdict(f"t{i}")] if i % 20 == 0 else [])]
    leave_in_spool(spool, records)
    assert len(list(spool.glob("*.seg"))) > 1

    sink = FlakySink()
    again = TraceEmitter(sink, slow(20), spool_dir=spool)  # found when opened, before anything is replayed
    try:
        assert again.replayed_verdicts == ("t0", "t20", "t40")
        assert [v.request_id for v in again.pending_verdicts("t20") or []] == ["t20"]
        assert again.pending_verdicts("t1") == []
        again.start()
        assert wait_until(lambda: again.backlog_size() == 0, 20)  # replayed and stored
        assert sink.ids[:2] == ["t0", "t1"] and len(sink.ids) == 60
        assert again.pending_verdicts("t20") == []
    finally:
        again.close()
    third = TraceEmitter(FlakySink(), slow(), spool_dir=spool)  # every verdict acknowledged: none found
    try:
        assert third.replayed_verdicts == () and third.pending_verdicts("t0") == []
    finally:
        third.close()


def test_a_damaged_or_foreign_file_in_the_spool_finds_nothing_and_fails_nothing(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    leave_in_spool(spool, [verdict("ok")])
    (spool / "00000000000000000099.seg").write_bytes(b"")  # empty: cannot be mapped
    (spool / "notes.seg").write_bytes(b"not a segment")
    assert [(seq, rid) for seq, rid, _ in spooled_verdicts(spool, -1, 10**9)] == [(0, "ok")]
    assert list(spooled_verdicts(spool, 0, 10**9)) == []  # acknowledged up to it
    assert list(spooled_verdicts(tmp_path / "nowhere", -1, 10**9)) == []


def test_past_the_cap_an_id_it_holds_none_of_cannot_be_told_until_the_store_passes_the_forgotten() -> None:
    held = PendingVerdicts(cap=2)
    payloads = {rid: orjson.dumps(verdict(rid).model_dump(mode="json")) for rid in ("a", "b", "c")}
    for seq, rid in enumerate(("a", "b", "c")):
        held.add(seq, rid, payloads[rid])
    assert len(held) == 2
    assert held.verdicts("a") is None  # forgotten while it still waits: not "none"
    assert held.verdicts("z") is None
    assert [v.request_id for v in held.verdicts("c") or []] == ["c"]  # one it holds is a verdict all the same
    held.stored(0)  # the forgotten one is stored now
    assert held.verdicts("a") == [] and held.verdicts("z") == []
    held.stored(2)
    assert held.verdicts("c") == [] and len(held) == 0
    held.add(3, "bad", b'{"request_id": "bad", "correct": "maybe"}')
    assert held.verdicts("bad") == []  # does not validate: quarantined by the store, no verdict
