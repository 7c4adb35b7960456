"""Where the traces taken from outside came from (a file's line, an intake body's), until the store has them.

A record refused at intake is quarantined with its source and line at once (``import:FILE``,
``intake``). A trace the store refuses later, one that conflicts with a trace stored under its
``request_id``, is refused on the batcher's writer thread, long after its line was read: the
intake files the line's origin here before it emits the trace (:meth:`Origins.add`), the writer
takes the origins of the traces of each write as it accounts for it (:meth:`Origins.settle`), and
a refusal among them is quarantined under its origin instead of ``sink``.

While nothing is filed (the gateway's own traces) a write costs one truth test. While something
is, each trace of a write is matched by its ``request_id``, read from the payload's head (the
encoder writes it second). At most ``cap`` origins are held: past it the oldest is forgotten (a
trace the spool dropped is never settled), and its refusal, if any, says ``sink`` as before.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence

import orjson

from ingest.kinds import Kind
from ingest.spool.segment import Frame

__all__ = ["CAP", "NONE_SETTLED", "Origin", "Origins", "Settled"]

CAP = 100_000
Origin = tuple[str, int]  # (source, line)
_KEY = b'"request_id":"'
_TRACES = frozenset({int(Kind.TRACE), int(Kind.TRACE_UNCHECKED)})


def _request_id(payload: bytes) -> str | None:
    """The trace's ``request_id``: found near the head of an encoded trace, else parsed."""
    at = payload.find(_KEY, 0, 64)
    if at != -1:
        start = at + len(_KEY)
        end = payload.find(b'"', start)
        if end != -1 and b"\\" not in payload[start:end]:
            return payload[start:end].decode("utf-8", "replace")
    try:
        value = orjson.loads(payload).get("request_id")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) else None


class Settled:
    """The origins of one write's traces: :meth:`of` a refused payload is its line's origin."""

    def __init__(self, found: dict[str, list[tuple[bytes, Origin]]]) -> None:
        self._found = found

    def of(self, payload: bytes) -> dict[str, str | int]:
        """The origin of the refused trace ``payload`` (the bytes of one of the write's frames), taken once.

        As keyword arguments of the quarantine: ``{"source": ..., "line": ...}``, or ``{}`` when none is
        held. Two equal payloads (one line repeated in a file) are two frames: each refusal takes the
        next one's origin.
        """
        rid = _request_id(payload) if self._found else None
        candidates = self._found.get(rid, []) if rid is not None else []
        for i, (frame_payload, (source, line)) in enumerate(candidates):
            if frame_payload is payload or frame_payload == payload:
                del candidates[i]
                return {"source": source, "line": line}
        return {}


NONE_SETTLED = Settled({})  # the write's when no origin is held


class Origins:
    """The origins of the traces emitted from outside and not yet stored, by ``request_id``, oldest first.

    Filed from the threads that take intake lines; settled by the batcher's writer.
    """

    def __init__(self, cap: int = CAP) -> None:
        self.cap = cap
        self._lock = threading.Lock()
        self._next = 0
        self._by_id: dict[str, deque[int]] = {}
        self._held: dict[int, tuple[str, Origin]] = {}  # token -> (request_id, origin), in filing order

    def __len__(self) -> int:
        return len(self._held)

    def add(self, request_id: str, source: str, line: int) -> int:
        """File the origin of a trace about to be emitted; returns a token for :meth:`discard`."""
        with self._lock:
            token = self._next
            self._next += 1
            self._held[token] = (request_id, (source, line))
            self._by_id.setdefault(request_id, deque()).append(token)
            if len(self._held) > self.cap:
                self._drop(next(iter(self._held)))
        return token

    def discard(self, token: int) -> None:
        """Forget a filed origin whose trace was not emitted after all."""
        with self._lock:
            if token in self._held:
                self._drop(token)

    def _drop(self, token: int) -> None:
        request_id, _ = self._held.pop(token)
        tokens = self._by_id[request_id]
        tokens.remove(token)
        if not tokens:
            del self._by_id[request_id]

    def settle(self, frames: Sequence[Frame]) -> Settled:
        """Take the origins of the traces in ``frames`` (one write's, in order): they are stored or refused now."""
        found: dict[str, list[tuple[bytes, Origin]]] = {}
        with self._lock:
            by_id = self._by_id
            for _, kind, payload in frames:
                if kind not in _TRACES or not by_id:
                    continue
                rid = _request_id(payload)
                tokens = by_id.get(rid) if rid is not None else None
                if tokens is None or rid is None:
                    continue
                token = tokens.popleft()
                if not tokens:
                    del by_id[rid]
                found.setdefault(rid, []).append((payload, self._held.pop(token)[1]))
        return Settled(found)
