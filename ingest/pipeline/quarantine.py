"""Quarantine: records that failed validation or storage, kept with their reason.

Each one is appended to a JSONL file at once (so it survives whatever happens to the pipeline)
and handed back to the caller as a :class:`QuarantinedRecord`, which goes through the pipeline
into the ``quarantine`` table or index. Nothing readable of an unknown field, or of a known field
whose value does not fit it, is kept: foreign input could carry a raw query (in a field of its own
or, say, as its ``query_hash``), and the query text must never be stored.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from ingest.codec.encoder import content_id, dumps
from ingest.codec.stored_rows import model_in
from schemas.records import QuarantinedRecord

__all__ = ["NOT_FINITE", "Quarantine", "describe_validation_error", "redact"]

log = logging.getLogger(__name__)
REDACTED = "[redacted]"
_MAX_RAW = 64 * 1024


_BOUNDS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})
NOT_FINITE = "Input should be a finite number"  # pydantic's own words (its ``finite_number`` error)


def _non_finite(value: Any) -> bool:
    """Whether ``value`` is NaN or an infinity, or a string pydantic reads as one (``"nan"``, ``"1e400"``)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, str):
        try:
            return not math.isfinite(float(value))
        except ValueError:
            return False
    return False


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """Return ``loc: message`` for the first errors, never echoing the input values.

    A bound's error on NaN or an infinity (``"nan"`` on a field ``ge=0``: NaN compares false with
    everything) says what is wrong with it, that it is not a finite number, not that it is out of range.
    """
    parts = []
    for err in exc.errors(include_url=False)[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "<record>"
        msg = NOT_FINITE if err["type"] in _BOUNDS and _non_finite(err.get("input")) else err["msg"]
        parts.append(f"{loc}: {msg}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


@cache
def _field_adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    typ: Any = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation  # with constraints
    return TypeAdapter(typ)


def _fits(model: type[BaseModel], name: str, value: Any) -> bool:
    try:
        _field_adapter(model, name).validate_python(value)
    except ValidationError:
        return False
    return True


def redact(value: Any, model: type[BaseModel] | None) -> Any:
    """Return ``value`` with ``"[redacted]"`` for unknown keys and for values that do not fit their field.

    Recursively into nested models; what fits its field stays readable.
    """
    if isinstance(value, list):
        return [redact(v, model) for v in value]
    if not isinstance(value, dict) or model is None:
        return REDACTED
    out = {}
    for key, item in value.items():
        name = str(key)
        info = model.model_fields.get(name)
        inner = None if info is None else model_in(info.annotation)
        if info is None:
            out[name] = REDACTED
        elif inner is not None and isinstance(item, (dict, list)):
            out[name] = redact(item, inner)
        else:
            out[name] = item if _fits(model, name, item) else REDACTED
    return out


class Quarantine:
    """Writes quarantine records to ``folder/quarantine-YYYY-MM-DD.jsonl`` (UTC days).

    With ``keep_days`` (``storage.retention_days``), a day's file is deleted once every record it can
    hold is older than that, as retention deletes the quarantine table's rows: at :meth:`prune`
    (the pipeline's start) and at the first record of each day.

    Args:
        folder: Where the files go (created on first use); None keeps no file (tests only).
        clock: UTC wall clock.
        keep_days: Days a file is kept after its day ends (None: kept for ever).
    """

    def __init__(self, folder: str | Path | None, clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 keep_days: int | None = None) -> None:
        self.folder = Path(folder) if folder is not None else None
        self._clock = clock
        self._lock = threading.Lock()
        self.keep_days = keep_days
        self._pruned_on: date | None = None

    def prune(self) -> list[Path]:
        """Delete the day files whose every record is older than ``keep_days``; the files deleted."""
        today = self._clock().date()
        self._pruned_on = today
        if self.keep_days is None or self.folder is None or not self.folder.is_dir():
            return []
        cutoff = today - timedelta(days=self.keep_days)
        gone = []
        for path in sorted(self.folder.glob("quarantine-*.jsonl")):
            try:
                day = date.fromisoformat(path.stem.removeprefix("quarantine-"))
            except ValueError:
                continue  # not one of ours: left alone
            if day + timedelta(days=1) <= cutoff:  # its last record is older than the retention
                try:
                    path.unlink()
                except OSError as exc:
                    log.warning("cannot delete old quarantine file %s: %s", path, exc)
                    continue
                gone.append(path)
        if gone:
            log.info("deleted %d quarantine file(s) older than %d days from %s (storage.retention_days)",
                     len(gone), self.keep_days, self.folder)
        return gone

    def record(
        self,
        *,
        kind: str,
        source: str,
        reason: str,
        raw: bytes | None,
        model: type[BaseModel] | None = None,
        request_id: str | None = None,
        line: int | None = None,
        max_raw: int = _MAX_RAW,
    ) -> QuarantinedRecord:
        """Build, file and return the quarantine record of one bad input.

        The (redacted) raw record is kept when it is at most ``max_raw`` bytes; larger ones keep
        only their size and SHA-256.
        """
        now = self._clock()
        kept = None
        if raw is not None and len(raw) <= max_raw:
            try:
                kept = orjson.dumps(redact(orjson.loads(raw), model)).decode()
                kept = kept if len(kept) <= max_raw else None
            except orjson.JSONDecodeError:
                kept = None  # unparseable text may hold anything: keep only its size and hash
        sha = hashlib.sha256(raw).hexdigest() if raw is not None else None
        rid = request_id if request_id is not None and len(request_id) <= 128 else None
        qid = content_id(f"{source}\x00{line}\x00{sha}\x00{reason}\x00{now.isoformat()}".encode())
        rec = QuarantinedRecord(
            quarantine_id=qid, ts=now, kind=kind, source=source, reason=reason[:2000], request_id=rid,
            line=line, raw=kept, raw_bytes=len(raw) if raw is not None else 0, raw_sha256=sha,
        )
        self._file(rec)
        log.warning("quarantined a %s from %s%s: %s", kind, source, f" line {line}" if line else "", rec.reason)
        return rec

    def _file(self, rec: QuarantinedRecord) -> None:
        if self.folder is None:
            return
        if self.keep_days is not None and rec.ts.date() != self._pruned_on:  # a new day: yesterday's may go
            self.prune()
        path = self.folder / f"quarantine-{rec.ts:%Y-%m-%d}.jsonl"
        try:
            with self._lock:
                self.folder.mkdir(parents=True, exist_ok=True)
                with path.open("ab") as fh:
                    fh.write(dumps(rec) + b"\n")
        except OSError as exc:  # the table still gets it through the pipeline
            log.error("cannot write quarantine file %s: %s", path, exc)
