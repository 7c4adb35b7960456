"""One spool segment: a preallocated, memory-mapped file of framed records.

Frame layout (little-endian)::

    u32 length | u32 checksum(seq, kind, payload) | u64 seq | u8 kind | 3 pad | payload | pad to 4

The checksum is the low half of XXH3-64 of the payload seeded with ``seq`` and ``kind`` (about
70 ns for a 4 KB trace where CRC-32 took 1.2 µs of each ``emit()``). Segments of the first
format (``RLSPOOL1``, CRC-32) left by an older version are still replayed.

The length is written last, so a frame is visible only once complete: a zero length marks the end
of the written part, ``0xFFFFFFFF`` says the writer moved on to the next segment. Before a frame
is published, the length word after it is zeroed: a reused segment (see :meth:`Segment.reuse`)
still holds old frames further on, and the reader must stop where the new ones end. Writing is a
``memcpy`` into the shared mapping: the bytes survive a crash of the process (not of the machine
until flushed, see ``fsync``), and ``emit()`` makes no system call.
"""

from __future__ import annotations

import binascii
import ctypes
import mmap
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path

from xxhash import xxh3_64_intdigest

__all__ = ["FILE_HEADER", "FRAME_HEADER", "Frame", "Segment", "fits_after", "frame_size"]

FILE_MAGIC = b"RLSPOOL2"
FILE_HEADER = struct.Struct("<8sQ")  # magic, first seq
FRAME_HEADER = struct.Struct("<IIQB3x")
_BODY = struct.Struct("<QB")
END_OF_SEGMENT = 0xFFFFFFFF
_ZERO = bytes(4)
_MADV_POPULATE_WRITE = 23  # linux/mman.h; not in Python's mmap module before 3.13
# madvise through ctypes: a foreign call releases the GIL, ``mmap.madvise`` does not (populating
# a megabyte takes about half a millisecond, which would stall every other thread). The symbols are
# resolved in the process's global scope (libc's own, as the C library would call them), not in
# libc's handle: an LD_PRELOAD library that interposes ``msync`` then applies to the spool too
# (tests/e2e/test_slow_disk.py makes the disk slow that way).
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MS_SYNC = 4  # linux/mman.h

Frame = tuple[int, int, bytes]  # seq, kind, payload


def frame_size(payload_len: int) -> int:
    """Return the bytes a frame with a payload of ``payload_len`` takes, padding included."""
    return FRAME_HEADER.size + ((payload_len + 3) & ~3)


def fits_after(used: int, payload_len: int, size: int) -> bool:
    """Return True when a frame of ``payload_len`` fits after ``used`` bytes of a ``size``-byte segment.

    Room is left for the 4-byte end marker (or the zero length word) that follows every frame.
    """
    return used + frame_size(payload_len) + 4 <= size


def _checksum(seq: int, kind: int, payload: bytes) -> int:
    return xxh3_64_intdigest(payload, (seq << 8) | kind) & 0xFFFFFFFF


def _crc32(seq: int, kind: int, payload: bytes) -> int:
    return binascii.crc32(payload, binascii.crc32(_BODY.pack(seq, kind)))


# The frame checksum of each segment format, by the magic that opens the file.
_CHECKSUMS: dict[bytes, Callable[[int, int, bytes], int]] = {FILE_MAGIC: _checksum, b"RLSPOOL1": _crc32}


class Segment:
    """A segment file, mapped for writing (the newest) or reading (replay).

    Args:
        path: The file.
        first_seq: Sequence number of its first frame.
        size: Bytes preallocated when the file is created.
    """

    def __init__(self, path: Path, first_seq: int, size: int, *, create: bool) -> None:
        self.path = path
        self.first_seq = first_seq
        if create:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)  # ENOSPC/EFBIG here, not SIGBUS on a later write
                os.pwrite(fd, FILE_HEADER.pack(FILE_MAGIC, first_seq), 0)
            except OSError:
                os.close(fd)
                path.unlink(missing_ok=True)
                raise
        else:
            fd = os.open(path, os.O_RDWR)
        try:
            self.size = os.fstat(fd).st_size
            self._map = mmap.mmap(fd, self.size)
        finally:
            os.close(fd)
        view = ctypes.c_char.from_buffer(self._map)  # only to learn the address; released at once
        self._addr = ctypes.addressof(view)
        del view
        self.end = FILE_HEADER.size  # first free byte (writer) or end of valid data (after scan)
        # Checks frames on replay: the format this process writes, until read_header() learns the file's.
        self._verify: Callable[[int, int, bytes], int] = _checksum
        # Background calls on the mapping by address (msync, madvise) pin it: close() leaves the
        # unmapping to the last of them (see close()).
        self._pin_lock = threading.Lock()
        self._pins = 0
        self._closing = False

    def fits(self, payload_len: int) -> bool:
        """Return True when a frame of ``payload_len`` still fits, leaving room for the end marker."""
        return fits_after(self.end, payload_len, self.size)

    def append(self, seq: int, kind: int, payload: bytes) -> int:
        """Write one frame at the end; return its offset. The caller checked :meth:`fits`."""
        off = self.end
        m = self._map
        nxt = off + frame_size(len(payload))
        m[nxt : nxt + 4] = _ZERO  # the end of the data once this frame is published (fits() left room)
        m[off + 4 : off + FRAME_HEADER.size] = FRAME_HEADER.pack(0, _checksum(seq, kind, payload), seq, kind)[4:]
        start = off + FRAME_HEADER.size
        m[start : start + len(payload)] = payload
        m[off : off + 4] = len(payload).to_bytes(4, "little")
        self.end = nxt
        return off

    def reuse(self, path: Path, first_seq: int) -> None:
        """Make this spent segment (every frame delivered) the new, empty segment ``path``.

        The first length word is zeroed and the header rewritten before the rename, so a crash at
        any point leaves either a spare file (not read at start-up) or an empty segment: never old
        frames under a new name. The mapping is kept: pages still dirty from the last round take
        no page fault when written again, where a new file's pages must each be allocated.
        """
        head = FILE_HEADER.size
        self._map[head : head + 4] = _ZERO
        self._map[:head] = FILE_HEADER.pack(FILE_MAGIC, first_seq)
        self._verify = _checksum
        self.rename(path)
        self.first_seq, self.end = first_seq, head

    def rename(self, path: Path) -> None:
        """Move the file (it stays mapped)."""
        os.replace(self.path, path)
        self.path = path

    def close_for_writing(self) -> None:
        """Mark that the writer moved on to the next segment."""
        self._map[self.end : self.end + 4] = END_OF_SEGMENT.to_bytes(4, "little")

    def read(self, off: int, *, verify: bool = True) -> tuple[Frame | None, int, str | None]:
        """Read the frame at ``off``; ``verify`` checks its checksum.

        Returns:
            ``(frame, next_offset, problem)``: ``frame`` is None at the end of the data (problem
            None), at the end marker (problem ``"end"``) or on a damaged frame (problem says why).
        """
        m = self._map
        if off + FRAME_HEADER.size > self.size:
            return None, off, None
        length, check, seq, kind = FRAME_HEADER.unpack_from(m, off)
        if length == 0:
            return None, off, None
        if length == END_OF_SEGMENT:
            return None, off, "end"
        start = off + FRAME_HEADER.size
        if start + length > self.size:
            return None, off, f"frame at {self.path.name}:{off} overruns the segment"
        payload = m[start : start + length]
        if verify and self._verify(seq, kind, payload) != check:
            return None, off, f"checksum mismatch at {self.path.name}:{off} (seq {seq})"
        return (seq, kind, payload), off + frame_size(length), None

    def prefault(self, start: int, length: int) -> bool:
        """Fault pages in for writing ahead of the writer, so ``append`` takes no page fault.

        Uses ``MADV_POPULATE_WRITE`` (Linux 5.14+), which maps the pages without changing a byte,
        so it is safe while the writer appends. Returns False where the kernel lacks it. A closed
        segment is left alone (True).
        """
        page = mmap.PAGESIZE
        start -= start % page
        length = min(length, self.size - start)
        if length <= 0 or not self._pin():
            return True
        try:
            done = _LIBC.madvise(ctypes.c_void_p(self._addr + start), ctypes.c_size_t(length), _MADV_POPULATE_WRITE)
        finally:
            self._unpin()
        return bool(done == 0)

    def read_fresh(self, off: int, below: int, max_records: int, max_bytes: int, out: list[Frame]) -> int:
        """Append to ``out`` the complete frames from ``off`` with seq below ``below``; return the new offset.

        The fast path for frames this process wrote itself (no checksum test, no per-frame call);
        it stops at the end of the data, the end marker, or a limit, and leaves those to :meth:`read`.
        """
        m, unpack, head = self._map, FRAME_HEADER.unpack_from, FRAME_HEADER.size
        size, taken, end = 0, 0, self.size - head
        while taken < max_records and size < max_bytes and off <= end:
            length, _, seq, kind = unpack(m, off)
            if length == 0 or length == END_OF_SEGMENT or seq >= below:
                break
            start = off + head
            out.append((seq, kind, m[start : start + length]))
            off = start + ((length + 3) & ~3)
            size += length
            taken += 1
        return off

    def flush(self) -> None:
        """Flush the mapping to disk (``msync``).

        Through ctypes, like ``madvise`` above: ``mmap.flush`` holds the GIL for the whole
        ``msync`` (a millisecond or more per dirty megabyte), stalling the request thread; a
        foreign call releases it. A closed segment (retired: every frame delivered) is not flushed.
        """
        if not self._pin():
            return
        try:
            if _LIBC.msync(self._addr, self.size, _MS_SYNC) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"msync {self.path}: {os.strerror(err)}")
        finally:
            self._unpin()

    def _pin(self) -> bool:
        """Keep the mapping until :meth:`_unpin`; False when the segment is closed or closing."""
        with self._pin_lock:
            if self._closing or self._map.closed:
                return False
            self._pins += 1
            return True

    def _unpin(self) -> None:
        with self._pin_lock:
            self._pins -= 1
            last = self._pins == 0 and self._closing
        if last:
            self._map.close()

    def close(self) -> None:
        """Unmap the file, now or, while a flush or prefault is using the mapping, when it ends.

        Never waits: segments are retired (closed) on the batcher's thread, and on the emitting
        one too (``drop_oldest``, a spare that cannot be reused), while the spool keeper's
        ``msync`` of one may take seconds on a slow disk. Unmapping under that ``msync`` made it
        fail (``ENOMEM``) and ended the keeper thread, and with it the ``interval`` flushes and
        the prefaulting.
        """
        with self._pin_lock:
            self._closing = True
            if self._pins:
                return  # the last user unmaps it
        self._map.close()

    def read_header(self) -> int:
        """Return the first sequence number the file header records.

        Raises:
            ValueError: The file is not a spool segment.
        """
        magic, first = FILE_HEADER.unpack_from(self._map, 0)
        if magic not in _CHECKSUMS:
            raise ValueError(f"{self.path} is not a spool segment")
        self._verify = _CHECKSUMS[magic]
        return int(first)
