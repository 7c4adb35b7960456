"""Importing a file of traces (JSONL or Parquet) through the same validation and pipeline.

Each record is checked like an intake line (:mod:`ingest.intake.lines`), accepted ones are emitted into a
:class:`TraceEmitter` (which stores them in batches), refused ones are quarantined with their line
number. The report counts what happened to every line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ingest.intake.lines import take_records
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter

__all__ = ["ImportReport", "UnreadableFile", "import_file", "read_records"]

Progress = Callable[[int, int], None]  # (done, total) in the file's unit (bytes or rows)


class UnreadableFile(ValueError):
    """The file cannot be read as its kind (a corrupt or truncated Parquet file); the message names it."""


@dataclass
class ImportReport:
    """What happened to the lines of one file."""

    lines: int = 0
    accepted: int = 0
    rejected: int = 0
    stored: int = 0
    duplicates: int = 0

    @property
    def complete(self) -> bool:
        """True when every line was stored (or was already stored under the same id)."""
        return self.rejected == 0 and self.stored + self.duplicates == self.accepted == self.lines


def _jsonl(path: Path, progress: Progress) -> Iterator[tuple[int, bytes]]:
    total, done = path.stat().st_size, 0
    with path.open("rb") as fh:
        for line_no, line in enumerate(fh, 1):
            done += len(line)
            if line.strip():
                yield line_no, line.rstrip(b"\r\n")
            if line_no % 1000 == 0:
                progress(done, total)
    progress(total, total)


def _parquet(path: Path, progress: Progress) -> Iterator[tuple[int, bytes]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:  # opened here, before the first record is asked for: a file that is no Parquet is refused whole
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise UnreadableFile(f"{path}: not a readable Parquet file: {exc}") from exc
    return _parquet_rows(path, pf, progress)


def _parquet_rows(path: Path, pf: Any, progress: Progress) -> Iterator[tuple[int, bytes]]:
    import pyarrow as pa

    total, line = pf.metadata.num_rows, 0
    batches = pf.iter_batches(batch_size=4096)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            break
        except (pa.ArrowException, OSError) as exc:
            raise UnreadableFile(f"{path}: unreadable after row {line} (the rows before it were taken): {exc}") from exc
        for row in batch.to_pylist():
            line += 1
            yield line, orjson.dumps({k: v for k, v in row.items() if v is not None}, default=str)
        progress(line, total)
    progress(total, total)


def read_records(path: Path, progress: Progress = lambda done, total: None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line or row number, raw JSON record)`` from a ``.parquet`` or JSONL file.

    Raises:
        UnreadableFile: A ``.parquet`` file is not Parquet (raised at once, before any record), or a
            later part of it cannot be read (raised while iterating).
    """
    return _parquet(path, progress) if path.suffix.lower() in (".parquet", ".pq") else _jsonl(path, progress)


def import_file(
    path: str | Path,
    emitter: TraceEmitter,
    *,
    mapping: Mapping[str, list[str]] | None = None,
    hash_key: str | None = None,
    progress: Progress = lambda done, total: None,
    timeout_s: float = 3600.0,
) -> ImportReport:
    """Import one file; return once every accepted record is stored (or the timeout passed).

    Raises:
        UnreadableFile: The file is no Parquet file (nothing is emitted), or turns unreadable midway.
    """
    src = Path(path)
    report = ImportReport()
    written0, dup0 = emitter.stats.stored(Kind.TRACE)
    records = read_records(src, progress)
    for res in take_records(records, emitter, source=f"import:{src.name}", mapping=mapping, hash_key=hash_key):
        report.lines += 1
        if res.trace is not None:
            report.accepted += 1
        else:
            report.rejected += 1
    emitter.flush(timeout_s)
    written, dup = emitter.stats.stored(Kind.TRACE)
    report.stored, report.duplicates = written - written0, dup - dup0
    return report
