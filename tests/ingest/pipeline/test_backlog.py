import threading
from pathlib import Path

import pytest

from ingest.errors import SpoolUnavailable
from ingest.kinds import Kind
from ingest.pipeline.backlog import Backlog
from ingest.pipeline.stats import PipelineStats
from ingest.spool.durable_spool import DurableSpool
from tests.polling import wait_until

SEG = 64 * 1024


def payload(name: str) -> bytes:
    return b'{"name":"%s","pad":"%s"}' % (name.encode(), b"x" * 1000)


def test_a_record_stored_while_an_emitter_waits_for_room_keeps_the_spool_in_sequence_order(tmp_path: Path) -> None:
    """The batcher stores a quarantine record while ``emit()`` waits for room under the block policy.

    Waiting releases the backlog's lock, so the batcher's record reaches the spool first; the
    waiting record must then be numbered after it. The reader skips frames by sequence number:
    a frame numbered below one already written would be skipped, i.e. lost.
    """
    backlog = Backlog(lambda: DurableSpool(tmp_path, segment_bytes=SEG, max_bytes=2 * SEG, mirror_records=1000),
                      PipelineStats(), policy="block")
    lock = backlog.lock  # what the emitter holds around append()
    spool = backlog.spool
    assert spool is not None
    n = 0
    with lock:
        while not backlog.memory:  # fill the spool: the first record that does not fit stays in memory
            backlog.append(Kind.TRACE, payload(f"fill{n}"), may_block=False)
            n += 1
    first = backlog.take(10_000)
    assert len(first.frames) == n and first.spool_last is not None

    def emit_waiting() -> None:
        with lock:
            backlog.append(Kind.TRACE, payload("waited"))

    emitter = threading.Thread(target=emit_waiting)
    emitter.start()
    assert wait_until(lambda: backlog.blocked, 5, every=0.01), "emit() should wait: the spool is full"
    with lock:
        spool.ack(first.spool_last)  # room for one more segment, without waking the emitter yet
        backlog.append(Kind.QUARANTINE, payload("batcher"), may_block=False)
        backlog.room.notify_all()
    emitter.join(5)
    assert not emitter.is_alive()
    with lock:
        for name in ("after1", "after2"):
            backlog.append(Kind.TRACE, payload(name))
    rest = backlog.take(10_000).frames
    names = [p.split(b'"')[3].decode() for _, _, p in rest]
    assert names == ["batcher", "waited", "after1", "after2"]
    seqs = [seq for seq, _, _ in rest]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    backlog.close()


@pytest.mark.parametrize("mirror", [0, 1000], ids=["from-segments", "from-mirror"])
def test_records_held_in_memory_while_the_spool_failed_are_taken_in_sequence_order(tmp_path: Path,
                                                                                    mirror: int) -> None:
    backlog = Backlog(lambda: DurableSpool(tmp_path, segment_bytes=SEG, mirror_records=mirror),
                      PipelineStats(), retry_spool_s=0)
    spool = backlog.spool
    assert spool is not None
    working = spool.append

    def unwritable(seq: int, kind: int, data: bytes) -> None:
        raise SpoolUnavailable("disk gone")

    for name, spool_ok in [("s0", True), ("m1", False), ("m2", False), ("s3", True), ("s4", True)]:
        spool.append = working if spool_ok else unwritable  # type: ignore[method-assign]
        backlog.append(Kind.TRACE, payload(name))
    assert len(backlog.memory) == 2
    taken = [backlog.take(2), backlog.take(10)]
    assert [[p.split(b'"')[3].decode() for _, _, p in t.frames] for t in taken] == [["s0", "m1"], ["m2", "s3", "s4"]]
    assert [(t.spool_last, t.from_memory) for t in taken] == [(0, 1), (4, 1)]
    backlog.close()


def test_a_disk_error_in_the_keepers_round_is_counted_not_raised(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    stats = PipelineStats()
    backlog = Backlog(lambda: DurableSpool(tmp_path, segment_bytes=SEG), stats)
    backlog.append(int(Kind.TRACE), payload("a"))
    assert backlog.spool is not None

    def eio() -> None:
        raise OSError(5, "msync: Input/output error")

    monkeypatch.setattr(backlog.spool, "flush", eio)
    backlog.keep(flush=False)  # no flush asked: nothing fails
    assert stats.spool_errors == 0
    backlog.keep(flush=True)  # the keeper's thread would have died of this
    assert stats.spool_errors == 1
    backlog.close()
