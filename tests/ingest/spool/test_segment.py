"""A segment's mapping outlives the background calls on it: close() never pulls it from under an msync."""

import threading
from pathlib import Path
from typing import Any

import pytest

from ingest.spool import segment
from ingest.spool.durable_spool import DurableSpool
from ingest.spool.segment import Segment

SEG = 64 * 1024


class SlowDisk:
    """Stands in for libc: ``msync`` waits until released (a disk that takes its time), then does its work."""

    def __init__(self) -> None:
        self.real = segment._LIBC
        self.madvise = self.real.madvise
        self.entered, self.release = threading.Event(), threading.Event()

    def msync(self, addr: int, size: int, flags: int) -> Any:
        self.entered.set()
        assert self.release.wait(10)
        return self.real.msync(addr, size, flags)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> SlowDisk:
    slow = SlowDisk()
    monkeypatch.setattr(segment, "_LIBC", slow)
    return slow


def flush_in_background(target: DurableSpool | Segment, disk: SlowDisk) -> tuple[threading.Thread, list[OSError]]:
    errors: list[OSError] = []

    def run() -> None:
        try:
            target.flush()
        except OSError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert disk.entered.wait(10)  # the flush is in msync now
    return thread, errors


def test_a_segment_retired_during_a_slow_flush_is_unmapped_when_the_flush_ends(tmp_path: Path, disk: SlowDisk) -> None:
    """The spool keeper flushes the segment being written; the writer moves on and the batcher
    acknowledges it, so it is deleted (no spares): its msync must still find it mapped (before:
    ENOMEM, which ended the keeper thread)."""
    sp = DurableSpool(tmp_path, segment_bytes=SEG, max_bytes=SEG * 100, spare_segments=0)
    for i in range(10):
        sp.append(i, 1, b"x" * 1000)
    first = sp._writer
    assert first is not None
    thread, errors = flush_in_background(sp, disk)
    for i in range(10, 200):  # rolls over to new segments
        sp.append(i, 1, b"x" * 1000)
    assert len(sp.read(1000)) == 200
    sp.ack(199)
    assert not first.path.exists()  # retired and deleted while its msync waits for the disk
    assert not first._map.closed  # but still mapped
    disk.release.set()
    thread.join(10)
    assert errors == []
    assert first._map.closed  # unmapped by the flush, once done
    sp.close()


def test_close_waits_for_no_one_and_a_closed_segment_is_neither_flushed_nor_prefaulted(
        tmp_path: Path, disk: SlowDisk) -> None:
    seg = Segment(tmp_path / "a.seg", 0, SEG, create=True)
    thread, errors = flush_in_background(seg, disk)
    seg.close()  # returns at once: the msync still holds the mapping
    assert not seg._map.closed
    disk.release.set()
    thread.join(10)
    assert errors == [] and seg._map.closed
    disk.entered.clear()
    seg.flush()
    assert not disk.entered.is_set()  # no msync of an unmapped address
    assert seg.prefault(0, SEG) is True
