"""The spool's read-ahead mirror: the newest frames, held in memory as well as in the mapping.

While the batcher keeps up it takes frames from here instead of copying them back out of the
segments. :meth:`Mirror.add` runs inside ``emit()``: it keeps references in flat lists and makes
no object the garbage collector tracks (two tuples per frame did, and the young-generation
collections they set off ran inside ``emit()`` calls). The frame tuples are made by
:meth:`Mirror.take`, on the batcher's thread.
"""

from __future__ import annotations

import threading

from ingest.spool.segment import Frame, Segment

__all__ = ["Mirror"]


class Mirror:
    """Consecutive frames from :attr:`first` on, at most ``cap`` of them; thread-safe.

    Args:
        cap: Frames held at most; past it, frames are only in the segments until the reader
            has taken everything held (then the mirror starts again at the next frame).
        first: The sequence number the first frame will have.
    """

    def __init__(self, cap: int, first: int) -> None:
        self.cap = cap
        self.first = first
        self._kinds: list[int] = []
        self._payloads: list[bytes] = []
        self._segs: list[Segment] = []  # where each frame ends in the mapping: segment ...
        self._ends: list[int] = []  # ... and offset
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._payloads)

    def add(self, seq: int, kind: int, payload: bytes, seg: Segment, end: int) -> None:
        """Hold frame ``seq`` (ending at ``end`` in ``seg``) if it continues the held ones and there is room."""
        with self._lock:
            held = len(self._payloads)
            if not held:
                self.first = seq
            if held < self.cap and seq == self.first + held:
                self._kinds.append(kind)
                self._payloads.append(payload)
                self._segs.append(seg)
                self._ends.append(end)

    def take(self, seq: int, max_records: int, out: list[Frame]) -> tuple[Segment, int] | None:
        """Move up to ``max_records`` frames to ``out`` if the held ones start at ``seq``.

        Returns:
            Where the last frame moved ends in the mapping (the reader skips to there), or None
            when nothing held starts at ``seq``.
        """
        with self._lock:
            if not self._payloads or self.first != seq:
                return None
            n = min(max_records, len(self._payloads))
            out += zip(range(seq, seq + n), self._kinds[:n], self._payloads[:n], strict=True)
            end = self._segs[n - 1], self._ends[n - 1]
            self._drop(n)
        return end

    def trim(self, read_seq: int) -> None:
        """Forget the frames below ``read_seq`` (the reader took them from the segments)."""
        with self._lock:
            behind = read_seq - self.first
            if behind > 0 and self._payloads:
                self._drop(behind)

    def _drop(self, n: int) -> None:
        del self._kinds[:n], self._payloads[:n], self._segs[:n], self._ends[:n]
        self.first += n
