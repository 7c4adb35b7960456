import binascii
import os
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ingest.errors import SpoolFull, SpoolUnavailable
from ingest.spool.durable_spool import DurableSpool
from ingest.spool.segment import FILE_HEADER, FRAME_HEADER, Segment

ROOT = Path(__file__).resolve().parents[3]
SEG = 64 * 1024


def spool(folder: Path, **kw: object) -> DurableSpool:
    return DurableSpool(folder, segment_bytes=SEG, **kw)  # type: ignore[arg-type]


def fill(sp: DurableSpool, n: int, size: int = 1000, start: int = 0) -> None:
    for i in range(start, start + n):
        sp.append(i, 1, f'{{"n":{i},"pad":"{"x" * size}"}}'.encode())


def test_frames_come_back_in_order_across_segments_and_acked_segments_go(tmp_path: Path) -> None:
    sp = spool(tmp_path, max_bytes=SEG * 100)
    fill(sp, 300)
    assert len(list(tmp_path.glob("*.seg"))) > 3
    got = sp.read(1000)
    assert [seq for seq, _, _ in got] == list(range(300))
    assert got[7][2].startswith(b'{"n":7,')
    sp.ack(299)
    assert len(list(tmp_path.glob("*.seg"))) == 1  # only the one being written survives
    assert (tmp_path / "ack").read_text() == "299"


def test_a_reopened_spool_replays_exactly_what_was_not_acknowledged(tmp_path: Path) -> None:
    sp = spool(tmp_path)
    fill(sp, 100)
    sp.read(60)
    sp.ack(59)
    sp.close()
    again = spool(tmp_path)
    assert again.next_seq == 100
    assert [s for s, _, _ in again.read(1000)] == list(range(60, 100))
    again.append(100, 1, b'{"n":100}')
    assert [s for s, _, _ in again.read(10)] == [100]


def test_the_memory_mirror_hands_back_the_same_frames_and_falls_back_to_the_segments(tmp_path: Path) -> None:
    """Reads interleave with appends; the mirror overflows (cap 50) and refills; every frame once, in order."""
    sp = spool(tmp_path, max_bytes=SEG * 100, mirror_records=50)
    got: list[tuple[int, int, bytes]] = []
    written = 0
    for burst, take in [(10, 100), (30, 5), (80, 100), (7, 3), (200, 20), (1, 1000), (40, 1000)]:
        fill(sp, burst, size=300, start=written)
        written += burst
        got += sp.read(take)
    got += sp.read(1000)
    assert [seq for seq, _, _ in got] == list(range(written))
    assert all(p.startswith(b'{"n":%d,' % seq) for seq, _, p in got)
    sp.ack(written - 1)
    sp.close()
    assert [s for s, _, _ in spool(tmp_path).read(1000)] == []  # all acknowledged: nothing to replay


def test_frames_taken_from_the_mirror_are_still_replayed_after_a_restart_until_acknowledged(tmp_path: Path) -> None:
    sp = spool(tmp_path, mirror_records=1000)
    fill(sp, 20)
    assert [s for s, _, _ in sp.read(100)] == list(range(20))  # from the mirror
    sp.ack(9)
    fill(sp, 5, start=20)
    sp.close()  # 10..24 never acknowledged
    again = spool(tmp_path, mirror_records=1000)
    fill(again, 3, start=25)
    assert [s for s, _, _ in again.read(1000)] == list(range(10, 28))


def test_a_damaged_frame_is_reported_and_later_segments_still_read(tmp_path: Path) -> None:
    sp = spool(tmp_path)
    fill(sp, 200)
    sp.close()
    first = sorted(tmp_path.glob("*.seg"))[0]
    data = bytearray(first.read_bytes())
    off = FILE_HEADER.size + 3 * (FRAME_HEADER.size + 1024) + FRAME_HEADER.size + 10  # inside frame 3
    data[off] ^= 0xFF
    first.write_bytes(bytes(data))
    damage: list[tuple[str, int]] = []
    again = spool(tmp_path, on_damage=lambda reason, lost: damage.append((reason, lost)))
    seqs = [s for s, _, _ in again.read(1000)]
    assert seqs[:3] == [0, 1, 2] and 3 not in seqs
    second_start = int(sorted(tmp_path.glob("*.seg"))[1].stem)
    assert seqs[3] == second_start and seqs[-1] == 199
    assert len(damage) == 1 and "checksum mismatch" in damage[0][0] and damage[0][1] == second_start - 3


def test_segments_of_the_first_format_left_by_an_older_version_are_replayed(tmp_path: Path) -> None:
    # RLSPOOL1 frames carry CRC-32 over (seq, kind) then the payload; written here by hand. Replay
    # checks every frame, so a frame checked with the wrong function would end the replay.
    frames = b""
    for seq in range(5):
        payload = f'{{"n":{seq}}}'.encode()
        crc = binascii.crc32(payload, binascii.crc32(struct.pack("<QB", seq, 1)))
        frames += struct.pack("<IIQB3x", len(payload), crc, seq, 1) + payload.ljust((len(payload) + 3) & ~3, b"\0")
    data = struct.pack("<8sQ", b"RLSPOOL1", 0) + frames + bytes(4)
    (tmp_path / f"{0:020d}.seg").write_bytes(data.ljust(SEG, b"\0"))
    sp = spool(tmp_path)
    assert [(s, p) for s, _, p in sp.read(10)] == [(i, f'{{"n":{i}}}'.encode()) for i in range(5)]
    sp.append(sp.next_seq, 1, b'{"n":"new"}')  # new frames go to a segment of the current format
    assert sp.read(10)[-1][2] == b'{"n":"new"}'


def test_the_size_limit_and_an_unusable_folder_are_distinct_errors(tmp_path: Path) -> None:
    sp = spool(tmp_path / "s", max_bytes=2 * SEG)
    with pytest.raises(SpoolFull, match="limit of 2 segments"):
        fill(sp, 500)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(SpoolUnavailable, match="not usable"):
        spool(blocker / "spool")


def test_a_record_larger_than_a_segment_is_refused(tmp_path: Path) -> None:
    sp = spool(tmp_path)
    with pytest.raises(SpoolFull, match="does not fit"):
        sp.append(0, 1, b"x" * (SEG + 1))


@pytest.mark.parametrize("ack_every", [0, 300], ids=["nothing-acked", "segments-reused"])
def test_kill_9_in_the_middle_of_writing_loses_no_completed_frame(tmp_path: Path, ack_every: int) -> None:
    """With acknowledgements (up to frame 1800), spent segments are written again over old frames."""
    writer = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from ingest.spool.durable_spool import DurableSpool
        sp = DurableSpool({str(tmp_path)!r}, segment_bytes=64 * 1024, fsync="never")
        i = 0
        while True:
            sp.append(i, 1, b'{{"n":%d,"pad":"%s"}}' % (i, b"y" * (400 + i % 500)))
            if {ack_every} and i % {ack_every} == 0 and i < 2000:
                sp.ack(sp.read(10**6)[-1][0])
            if i == 2000:
                print("going", flush=True)
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "going"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    damage: list[str] = []
    again = spool(tmp_path, on_damage=lambda reason, lost: damage.append(reason))
    seqs = [s for s, _, _ in again.read(10**7)]
    first = again.acked + 1
    assert again.acked == (1800 if ack_every else -1)
    # every frame appended before "going" (0..2000) survives, in order; the kill may come before the next
    assert seqs and seqs[-1] >= 2000 and seqs == list(range(first, first + len(seqs))) and damage == []
    assert again.next_seq == seqs[-1] + 1


def test_spent_segments_are_kept_as_spares_and_written_again(tmp_path: Path) -> None:
    sp = spool(tmp_path, max_bytes=SEG * 100)
    fill(sp, 300)
    sp.read(1000)
    sp.ack(299)
    spares = list(tmp_path.glob("*.spare"))
    assert len(spares) == 2 and sp.disk_bytes() == 3 * SEG
    inodes = {p.stat().st_ino for p in spares}
    fill(sp, 300, start=300)
    assert inodes <= {p.stat().st_ino for p in tmp_path.glob("*.seg")}  # the same files, written again
    assert [s for s, _, _ in sp.read(1000)] == list(range(300, 600))
    sp.close()
    again = spool(tmp_path, max_bytes=SEG * 100)  # the old frames behind the new ones are not replayed
    assert [s for s, _, _ in again.read(1000)] == list(range(300, 600)) and again.next_seq == 600


def test_a_reused_segment_ends_where_its_new_frames_end(tmp_path: Path) -> None:
    seg = Segment(tmp_path / "a.seg", 0, SEG, create=True)
    for i in range(10):
        seg.append(i, 1, b'{"old":%d,"pad":"%s"}' % (i, b"x" * 500))
    seg.reuse(tmp_path / "b.seg", 100)
    assert not (tmp_path / "a.seg").exists() and seg.read_header() == 100
    assert seg.read(FILE_HEADER.size) == (None, FILE_HEADER.size, None)  # empty before the first append
    seg.append(100, 1, b'{"new":1}')
    frame, off, problem = seg.read(FILE_HEADER.size)
    assert frame == (100, 1, b'{"new":1}') and problem is None
    assert seg.read(off) == (None, off, None)  # the end of the data, not the rest of old frame 0


def test_old_frames_behind_a_lost_end_marker_are_not_taken_for_new_ones(tmp_path: Path) -> None:
    """A machine crash can lose the page holding the end marker; the older frames behind it stay unused."""
    seg = Segment(tmp_path / "x.spare", 0, SEG, create=True)
    for i in range(10):
        seg.append(i, 1, b'{"n":%03d}' % i)  # frames of one size: old frame 1 starts where new frame 100 ends
    seg.reuse(tmp_path / f"{100:020d}.seg", 100)
    seg.append(100, 1, b'{"n":100}')
    seg.close()
    with open(seg.path, "r+b") as f:  # the end marker after frame 100 lost: old frame 1's length is back
        f.seek(FILE_HEADER.size + FRAME_HEADER.size + 12)
        f.write(len(b'{"n":001}').to_bytes(4, "little"))
    again = spool(tmp_path)
    assert again.next_seq == 101  # not 10, the last old frame's number plus one
    assert [s for s, _, _ in again.read(100)] == [100]
