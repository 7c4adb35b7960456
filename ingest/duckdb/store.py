"""The DuckDB trace store: one file, written by one process, read by the same process.

DuckDB admits one writing process per file. The server opens the file read-write, migrates it,
writes through :class:`ingest.duckdb.sink.DuckDBSink` and answers the query API itself; another
process may open the file with ``read_only=True`` once nothing writes it (offline analysis of a
copied file). A file locked by another process is not an error at start-up: the store connects
on first use and keeps trying, while the pipeline spools (``SinkUnavailable``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from pydantic import BaseModel

from ingest.codec.encoder import encode_batch
from ingest.duckdb.reader import DuckDBReader
from ingest.duckdb.schema import NewerFile, ensure_schema
from ingest.duckdb.sink import DuckDBSink
from ingest.errors import SinkError, SinkUnavailable
from ingest.record_sink import PreparedBatch, RecordBatch, WriteResult

__all__ = ["OFFLINE", "DuckDBTraceStore"]

OFFLINE: dict[str, str | bool | int | float | list[str]] = {"autoinstall_known_extensions": False, "TimeZone": "UTC"}
"""DuckDB settings of every connection to a store file (and so of each of its cursors).

Nothing is downloaded at run time: DuckDB's functions are linked into the package; with autoinstall
on, replaying a write-ahead log that holds a statement using one (a migration's ``list_transform``
lambda, left by a crash or by a close that does not checkpoint) tried to download ``core_functions``
instead of loading it, and the file could not be opened without a network.

Times are UTC whatever the machine's zone: a ``TIMESTAMPTZ`` is read into Python (and truncated to
a day or an hour in SQL) in the session's ``TimeZone``, which is the OS zone by default. Given at
connect, it holds for every cursor; a ``SET TimeZone`` holds for its own cursor only (reads go
through cursors)."""

log = logging.getLogger(__name__)
# DuckDB checkpoints by itself (at a commit) only past this much WAL; below it, the pipeline asks
# for a checkpoint when it goes idle (see DuckDBTraceStore.idle). Replaying 1 GB of WAL at a
# restart takes about 4 s on a small VM.
HARD_CHECKPOINT = "1GB"


class DuckDBTraceStore(DuckDBReader):
    """Records in one DuckDB file: the sink of the pipeline and the query API.

    Args:
        path: The database file; its folder is created when missing.
        read_only: Open for offline analysis (no migration, no writes).
        lazy: Do not fail when the file is locked now; connect on first use.
        retention_days: Delete records older than this, checked at most hourly.
        idle_checkpoint_bytes: Checkpoint when the pipeline is idle and the WAL holds this much.
        memory_limit: DuckDB's ``memory_limit`` (``"1GB"``); None leaves DuckDB's default (80% of RAM).
        clock: UTC wall clock (retention, migration timestamps).

    Raises:
        SinkUnavailable: The file is locked by another process (unless ``lazy``).
        SinkError: The file cannot be opened for another reason.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        lazy: bool = False,
        retention_days: int | None = None,
        idle_checkpoint_bytes: int = 256 << 20,
        memory_limit: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.path = Path(path)
        self.memory_limit = memory_limit
        self.idle_checkpoint_bytes = idle_checkpoint_bytes
        self.read_only = read_only
        self.retention_days = retention_days
        self._clock = clock
        self._connect_lock = threading.Lock()
        self._sink: DuckDBSink | None = None
        self._con_or_none: duckdb.DuckDBPyConnection | None = None
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._connect()
        except SinkUnavailable:
            if not lazy:
                raise

    def _connect(self) -> duckdb.DuckDBPyConnection:
        with self._connect_lock:
            if self._con_or_none is not None:
                return self._con_or_none
            try:
                # memory_limit: DuckDB's cache of table blocks grows with the table up to it
                config = dict(OFFLINE) if self.memory_limit is None else {**OFFLINE, "memory_limit": self.memory_limit}
                replayed = not self.read_only and os.path.exists(f"{self.path}.wal")  # a crash's log, or a close's
                con = duckdb.connect(str(self.path), read_only=self.read_only, config=config)
            except duckdb.IOException as exc:
                raise SinkUnavailable(f"cannot open {self.path}: {exc}") from exc
            except duckdb.Error as exc:
                raise SinkError(f"cannot open {self.path}: {exc}") from exc
            if not self.read_only:
                # A checkpoint (compressing the WAL into the file) takes a second or two; large
                # ones cost a third less CPU per trace than DuckDB's default of 16 MB. They wait
                # for the pipeline to be idle (idle()) unless the WAL passes HARD_CHECKPOINT.
                con.execute(f"SET checkpoint_threshold = '{HARD_CHECKPOINT}'")
                try:
                    if ensure_schema(con, self._clock()) or replayed:  # a migration, a log replayed: into the file
                        con.execute("CHECKPOINT")  # (a close after a replay leaves the log as it is)
                except NewerFile as exc:
                    con.close()
                    raise SinkError(f"cannot open {self.path}: {exc}") from exc
                self._sink = DuckDBSink(con, retention_days=self.retention_days, clock=self._clock)
            self._con_or_none = con
            return con

    @contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        cur = (self._con_or_none or self._connect()).cursor()
        try:
            yield cur
        finally:
            cur.close()

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        """Parse a batch into Arrow tables (the pipeline's :class:`ingest.record_sink.RecordSink` method)."""
        return DuckDBSink.prepare(batch)

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Store a prepared batch in one transaction.

        Raises:
            SinkUnavailable: The file is locked or the transaction failed; retry later.
        """
        self._connect()
        assert self._sink is not None, "a read-only store cannot write"
        return self._sink.write(prepared)

    def idle(self) -> None:
        """Checkpoint if the WAL holds ``idle_checkpoint_bytes`` or more (the writer thread calls this).

        Under a burst, compaction waits until the burst has been stored instead of stalling it.
        """
        if self._sink is None:
            return
        try:
            wal = os.path.getsize(f"{self.path}.wal")  # DuckDB keeps its WAL next to the file
        except OSError:
            return
        if wal >= self.idle_checkpoint_bytes:
            log.debug("checkpointing %s (%d MB of WAL)", self.path, wal >> 20)
            self.checkpoint()

    def checkpoint(self) -> None:
        """Compress what the WAL holds into the file now."""
        with self._cursor() as cur:
            cur.execute("CHECKPOINT")

    def write_records(self, records: Sequence[BaseModel]) -> WriteResult:
        """Store records directly, bypassing the pipeline (tools and tests)."""
        return self.write(self.prepare(encode_batch(records)))


    def apply_retention(self) -> None:
        """Delete what is older than ``retention_days`` now."""
        self._connect()
        if self._sink is not None:
            self._sink.apply_retention()

    def close(self) -> None:
        """Close the database file."""
        with self._connect_lock:
            if self._con_or_none is not None:
                self._con_or_none.close()
                self._con_or_none = None
                self._file_layout = None  # a file opened again may have been migrated meanwhile
