"""The spool's files beside the frames: the acknowledgement, the segments found at start-up, the spares.

A spool folder holds ``*.seg`` segment files (each named by its first sequence number), the ``ack``
file (the last record stored, replaced atomically) and at most ``spare_segments`` ``*.spare``
files: spent segments kept to be written again (:mod:`ingest.spool.durable_spool` says why). At
start-up :func:`recover` finds the segments and the last frame written; the reader checks each
frame when it gets there.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ingest.spool.segment import FILE_HEADER, Segment

__all__ = ["adopt_spares", "delete", "load_ack", "recover", "retire", "save_ack"]

log = logging.getLogger("ingest.spool.durable_spool")  # the spool's one logger, whichever module logs
_ACK = "ack"


def load_ack(folder: Path) -> int:
    """Return the last record acknowledged (-1: none yet)."""
    try:
        return int((folder / _ACK).read_text(encoding="ascii").strip() or "-1")
    except FileNotFoundError:
        return -1


def save_ack(folder: Path, seq: int) -> None:
    """Record ``seq`` as the last record acknowledged; a failure is logged (the data is safe)."""
    tmp = folder / (_ACK + ".tmp")
    try:
        tmp.write_text(str(seq), encoding="ascii")
        os.replace(tmp, folder / _ACK)
    except OSError as exc:  # the data is safe; only a replay after a restart gets longer
        log.warning("spool: cannot record the acknowledgement: %s", exc)


def recover(folder: Path) -> tuple[list[Segment], int]:
    """Return the segments in ``folder``, oldest first, each's end found, and the last frame's number (-1: none)."""
    last_seq = -1
    segments = []
    for path in sorted(folder.glob("*.seg")):
        try:
            seg = Segment(path, 0, 0, create=False)
            seg.first_seq = seg.read_header()
        except (OSError, ValueError) as exc:
            log.error("spool: ignoring unreadable segment %s: %s", path, exc)
            continue
        off = FILE_HEADER.size
        while True:
            frame, off, _ = seg.read(off)
            if frame is None:  # the end, or damage: the reader reports that when it gets there
                break
            if frame[0] <= last_seq:  # older than the frame before: left from a reused file
                break
            last_seq = frame[0]
        seg.end = off
        segments.append(seg)
    return segments, last_seq


def adopt_spares(folder: Path, keep: int, segment_bytes: int) -> list[Segment]:
    """Return up to ``keep`` spares of ``segment_bytes`` found in ``folder``; delete the others."""
    spares: list[Segment] = []
    for path in sorted(folder.glob("*.spare")):
        if len(spares) < keep and path.stat().st_size == segment_bytes:
            spares.append(Segment(path, 0, 0, create=False))
        else:
            path.unlink()
    return spares


def retire(seg: Segment, spares: list[Segment], keep: int, segment_bytes: int) -> None:
    """Keep a spent segment as a spare (in ``spares``) if there is room for one, else delete it."""
    if len(spares) < keep and seg.size == segment_bytes:
        try:
            seg.rename(seg.path.with_suffix(".spare"))
            spares.append(seg)
            return
        except OSError as exc:
            log.warning("spool: cannot keep %s as a spare: %s", seg.path.name, exc)
    delete(seg)


def delete(seg: Segment) -> None:
    """Unmap a segment and delete its file."""
    seg.close()
    seg.path.unlink(missing_ok=True)
