"""Verdicts spooled and not stored yet, by request id: one waiting counts as one given.

One verdict per request (``POST /v1/feedback``): the gateway asks its store whether a request has a
verdict once its own claims know none (they start again with it). A verdict on its way counts
too: in a gateway's spool, not yet relayed to the store process, or in the store's pipeline, not
yet written (``storage.store_flush_interval_ms``). :class:`PendingVerdicts` keeps the payloads of
the feedback records a pipeline has spooled until their batch is stored (at most ``cap``:
a verdict is a few hundred bytes), so the question is answered from memory, no write forced.
The records a spool holds from before a restart (a crash, or a close that could not deliver them)
are found at start-up (:meth:`PendingVerdicts.found_in`), before the batcher replays them.
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
from pydantic import ValidationError

from ingest.kinds import Kind
from ingest.spool.durable_spool import DurableSpool
from ingest.spool.segment import END_OF_SEGMENT, FILE_HEADER, FRAME_HEADER, frame_size
from schemas.feedback import Feedback

__all__ = ["PENDING_VERDICTS", "PendingVerdicts", "request_id_of", "spooled_verdicts"]

PENDING_VERDICTS = 65_536  # verdicts kept at most (about 20 MB of payloads at the most)


def request_id_of(payload: bytes) -> str | None:
    """The ``request_id`` of a feedback record's payload (None: not a JSON object with one)."""
    try:
        value = orjson.loads(payload).get("request_id")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


class PendingVerdicts:
    """The feedback records spooled and not yet stored, by request id and in spool order.

    Filled under ``Backlog.lock`` (in spool order) and emptied by the batcher's writer as batches
    are stored; read from any thread (its own lock keeps the two apart).

    Args:
        cap: Records kept at most (None: :data:`PENDING_VERDICTS`); past it the oldest are forgotten,
            and until the store has passed them :meth:`verdicts` answers None for an id it holds
            none of (cannot tell).

    Attributes:
        found: The request ids of the verdicts found in the spool at start-up (:meth:`found_in`), in
            spool order (those of the newest ``cap`` verdicts).
    """

    def __init__(self, cap: int | None = None) -> None:
        self.cap = PENDING_VERDICTS if cap is None else cap
        self.found: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._seq: dict[int, str] = {}  # spool sequence -> request id, in sequence order
        self._by_id: dict[str, dict[int, bytes]] = {}  # request id -> {sequence: payload}
        self._forgot = -1  # the newest sequence forgotten past the cap
        self._stored = -1  # the newest sequence stored (or dropped)

    @classmethod
    def found_in(cls, spool: DurableSpool | None, cap: int | None = None) -> PendingVerdicts:
        """The verdicts ``spool`` holds from before this start (none without a spool); call before it is read."""
        verdicts = cls(cap)
        if spool is not None:
            for seq, request_id, payload in spooled_verdicts(spool.folder, spool.acked, spool.replay_below):
                verdicts.add(seq, request_id, payload)
            verdicts.found = tuple(dict.fromkeys(verdicts._seq.values()))  # the newest ``cap`` at most
        return verdicts

    def add(self, seq: int, request_id: str, payload: bytes) -> None:
        """Keep the verdict spooled as ``seq`` (numbers come in increasing order)."""
        with self._lock:
            self._seq[seq] = request_id
            self._by_id.setdefault(request_id, {})[seq] = payload
            while len(self._seq) > self.cap:  # the store is far behind: the oldest go
                oldest = next(iter(self._seq))
                self._forgot = oldest
                self._forget(oldest)

    def stored(self, newest: int) -> None:
        """Forget every verdict up to spool sequence ``newest``: stored by now, refused, or dropped."""
        with self._lock:
            self._stored = max(self._stored, newest)
            while self._seq and (oldest := next(iter(self._seq))) <= newest:
                self._forget(oldest)

    def _forget(self, seq: int) -> None:
        request_id = self._seq.pop(seq)
        held = self._by_id[request_id]
        del held[seq]
        if not held:
            del self._by_id[request_id]

    def verdicts(self, request_id: str) -> list[Feedback] | None:
        """The verdicts on ``request_id`` waiting to be stored, oldest first; None: cannot tell.

        None only while records forgotten past the cap still wait and none on the id is kept. A
        payload that does not validate is left out (the store quarantines it: it is no verdict).
        """
        with self._lock:
            payloads = list(self._by_id.get(request_id, {}).values())
            unsure = self._forgot > self._stored
        if not payloads and unsure:
            return None
        return [v for v in map(_verdict_of, payloads) if v is not None]

    def __len__(self) -> int:
        """Verdicts kept."""
        return len(self._seq)


def _verdict_of(payload: bytes) -> Feedback | None:
    try:
        data = orjson.loads(payload)
        data.pop("feedback_id", None)  # the encoder's id field, not the contract's
        return Feedback.model_validate(data)
    except (orjson.JSONDecodeError, AttributeError, ValidationError):
        return None


def spooled_verdicts(folder: Path, after: int, below: int) -> Iterator[tuple[int, str, bytes]]:
    """``(seq, request id, payload)`` of the feedback records in ``folder``'s segments numbered in ``(after, below)``.

    Read through a read-only mapping of each segment file, frame headers only (a payload is read
    for a feedback record alone): the spool's own reader checks each frame when it gets there, and
    reports any damage. A segment whose successor starts at or before ``after + 1`` holds only
    acknowledged records and is skipped; an unreadable one is skipped too (the reader says why).
    """
    segments = sorted((int(p.stem), p) for p in folder.glob("*.seg") if p.stem.isdigit())
    for i, (_, path) in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1][0] <= after + 1:
            continue  # every record in it is acknowledged
        try:
            with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                found = list(_feedback_frames(m, after, below))
        except (OSError, ValueError):
            continue
        yield from found


def _feedback_frames(m: mmap.mmap, after: int, below: int) -> Iterator[tuple[int, str, bytes]]:
    """The feedback frames of one mapped segment in ``(after, below)``, up to its end or a frame out of order."""
    head, off, last = FRAME_HEADER.size, FILE_HEADER.size, -1
    while off + head <= len(m):
        length, _, seq, kind = FRAME_HEADER.unpack_from(m, off)
        if length in (0, END_OF_SEGMENT) or seq <= last or off + head + length > len(m):
            return  # the end, or frames left from the file's earlier use (recover() stops there too)
        last = seq
        if kind == Kind.FEEDBACK and after < seq < below:
            payload = m[off + head:off + head + length]
            if (request_id := request_id_of(payload)) is not None:
                yield seq, request_id, payload
        off += frame_size(length)
