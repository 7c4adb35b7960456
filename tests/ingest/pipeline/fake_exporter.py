"""A fake exporter for the pipeline's tests: records what it is sent, fails or waits on demand."""

from __future__ import annotations

import threading
import time

import orjson

from ingest.errors import SinkUnavailable
from ingest.kinds import Kind
from ingest.record_sink import PreparedBatch, RecordBatch, Rejected, WriteResult


class Exporter:
    """Keeps what it is sent.

    `down` raises SinkUnavailable, `broken` a TypeError (once), `refuse` refuses those request ids,
    `delay_s` sleeps in every write, `gate` holds writes back.
    """

    def __init__(self, *, down: bool = False, delay_s: float = 0.0) -> None:
        self.down = down
        self.delay_s = delay_s
        self.ids: list[str] = []
        self.kinds: list[Kind] = []
        self.writes = 0
        self.closed = False
        self.gate = threading.Event()
        self.gate.set()
        self.broken = False
        self.refuse: set[str] = set()

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        return PreparedBatch(batch)

    def write(self, prepared: PreparedBatch) -> WriteResult:
        self.gate.wait(30)
        time.sleep(self.delay_s)
        if self.down:
            raise SinkUnavailable("collector unreachable")
        if self.broken:
            self.broken = False
            raise TypeError("a bug in the exporter")
        self.writes += 1
        result = WriteResult()
        for kind, payloads in prepared.batch.payloads.items():
            for p in payloads:
                rid = orjson.loads(p).get("request_id") if kind is Kind.TRACE else None
                if rid in self.refuse:
                    result.rejected.append(Rejected(kind, p, "cannot map it"))
                    continue
                self.kinds.append(kind)
                if rid is not None:
                    self.ids.append(rid)
        return result

    def idle(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
