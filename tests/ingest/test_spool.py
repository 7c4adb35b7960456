import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ingest.errors import SpoolFull, SpoolUnavailable
from ingest.spool import DurableSpool
from ingest.spool_segment import FILE_HEADER, FRAME_HEADER

ROOT = Path(__file__).resolve().parents[2]
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


def test_kill_9_in_the_middle_of_writing_loses_no_completed_frame(tmp_path: Path) -> None:
    writer = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from ingest.spool import DurableSpool
        sp = DurableSpool({str(tmp_path)!r}, segment_bytes=64 * 1024, fsync="never")
        i = 0
        while True:
            sp.append(i, 1, b'{{"n":%d,"pad":"%s"}}' % (i, b"y" * 700))
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
    assert len(seqs) > 2000 and seqs == list(range(len(seqs))) and damage == []
