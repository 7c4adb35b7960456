"""Importing a file of traces (JSONL or Parquet) through the same validation and pipeline.

Other formats are refused whole before anything is read (:func:`check_format`): a CSV file
read as JSONL would have every line quarantined as malformed JSON.

Each record is checked like an intake line (:mod:`ingest.intake.lines`), accepted ones are emitted into a
:class:`TraceEmitter` (which stores them in batches), refused ones are quarantined with their line
number. The report counts what happened to every line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ingest.intake.lines import take_records
from ingest.kinds import Kind
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.stats import STORE

__all__ = ["FORMATS", "ImportReport", "UnreadableFile", "check_format", "import_file", "read_records"]

Progress = Callable[[int, int], None]  # (done, total) in the file's unit (bytes or rows)
FORMATS = "JSONL/NDJSON (one JSON object per line) or Parquet (.parquet, .pq)"
_PARQUET = (".parquet", ".pq")
_NOT_TAKEN = {".csv": "CSV", ".tsv": "TSV", ".xlsx": "Excel", ".xls": "Excel"}


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
    refused_by_store: int = 0  # accepted, then quarantined by the store (a different trace holds the id)

    @property
    def complete(self) -> bool:
        """True when every line was stored (or the same trace was already stored under its id)."""
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
        named = _has_non_finite(batch)
        for row in batch.to_pylist():
            line += 1
            record = {k: (_named(v) if named else v) for k, v in row.items() if v is not None}
            yield line, orjson.dumps(record, default=str)
        progress(line, total)
    progress(total, total)


def _has_non_finite(data: Any) -> bool:
    """Whether a float anywhere in ``data`` (an Arrow record batch or array, nested ones too) is inf or nan."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(data, pa.RecordBatch):
        return any(_has_non_finite(column) for column in data.columns)
    dtype = data.type
    if pa.types.is_floating(dtype):
        return bool(pc.any(pc.invert(pc.is_finite(data))).as_py())
    if pa.types.is_struct(dtype):
        return any(_has_non_finite(data.field(i)) for i in range(dtype.num_fields))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return _has_non_finite(data.values)
    if pa.types.is_map(dtype):
        return _has_non_finite(data.keys) or _has_non_finite(data.items)
    return False


def _named(value: Any) -> Any:
    """``value`` with its non-finite floats as strings: JSON has no infinity, and ``null`` would lose them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "inf", "-inf", "nan": refused on their line (ingest.intake.store_range)
    if isinstance(value, dict):
        return {k: _named(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_named(v) for v in value]
    return value


def check_format(path: Path) -> None:
    """Refuse, before anything is read or opened, a file of a format that is not imported.

    A file is Parquet by its suffix (``.parquet``, ``.pq``) and JSONL otherwise; a CSV, TSV or
    spreadsheet file would be read as JSONL and every one of its lines quarantined as malformed
    JSON, so it is refused whole, in one line that names the formats taken.

    Raises:
        UnreadableFile: The file's suffix names a format that is not imported.
    """
    kind = _NOT_TAKEN.get(path.suffix.lower())
    if kind is None:
        return
    hint = "" if kind == "Excel" else (f" (convert it first, e.g. with DuckDB: COPY (FROM '{path.name}') TO "
                                       f"'{path.stem}.parquet'; other routers' columns map with --mapping generic)")
    raise UnreadableFile(f"{path}: {kind} files are not imported; give {FORMATS}{hint}")


def read_records(path: Path, progress: Progress = lambda done, total: None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line or row number, raw JSON record)`` from a ``.parquet`` or JSONL file.

    Raises:
        UnreadableFile: The file is of a format not imported (:func:`check_format`), or a ``.parquet``
            file is not Parquet (both raised at once, before any record), or a later part of it
            cannot be read (raised while iterating).
    """
    check_format(path)
    return _parquet(path, progress) if path.suffix.lower() in _PARQUET else _jsonl(path, progress)


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
    refused0 = emitter.stats.sinks[STORE].rejected
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
    report.refused_by_store = emitter.stats.sinks[STORE].rejected - refused0
    return report
