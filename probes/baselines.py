"""Learned latency baselines per instance, persisted so a restart never relearns a degraded state.

The file is JSON, ``{"version": 1, "baselines": {instance: {"p50_ms", "p95_ms", "samples",
"learned_at"}}}``, written atomically (a temporary file in the same folder, fsync, rename). A
file that cannot be read or parsed is reported once (:attr:`BaselineStore.load_error`, a log
warning) and ignored: the prober starts learning again rather than crashing.

Another process may change the file while a prober runs: ``routelens probes baselines --forget``
drops a baseline learned in a bad hour (during a fault, or before a planned change made the new
normal). The prober's store notices at its next use (:meth:`BaselineStore.refresh`: the file's
inode, mtime and size against those it last read or wrote), reads it again before it writes, and
hands the instances whose baseline went or changed to the latency tracker (:meth:`BaselineStore.take_dropped`),
which learns them again from their next probes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Baseline", "BaselineStore"]

log = logging.getLogger(__name__)
_VERSION = 1


@dataclass(frozen=True, slots=True)
class Baseline:
    """One instance's learned latency: p50 and p95 (ms) of its first healthy probes."""

    p50_ms: float
    p95_ms: float
    samples: int
    learned_at: str = ""


class BaselineStore:
    """Baselines by instance id, loaded from ``path`` (if given) and saved on every change.

    Args:
        path: The JSON file; None keeps baselines in memory only.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.load_error: str | None = None
        self._baselines: dict[str, Baseline] = {}
        self._stamp = self._file_stamp()  # the file as this store last read or wrote it (None: no file)
        self._dropped: set[str] = set()
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _file_stamp(self) -> tuple[int, int, int] | None:
        if self.path is None:
            return None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def refresh(self) -> None:
        """Read the file again if another process changed it since this store read or wrote it.

        A baseline it no longer holds (or holds otherwise) is kept for :meth:`take_dropped`. A file
        removed drops every baseline.
        """
        if self.path is None:
            return
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        old = self._baselines
        self._baselines, self.load_error = {}, None
        if stamp is not None:
            self._load(self.path)
        self._stamp = stamp
        self._dropped |= {k for k, v in old.items() if self._baselines.get(k) != v}

    def take_dropped(self) -> set[str]:
        """The instances whose baseline another process dropped or changed since the last call."""
        dropped, self._dropped = self._dropped, set()
        return dropped

    def _load(self, path: Path) -> None:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or doc.get("version") != _VERSION:
                raise ValueError(f"not a version-{_VERSION} baselines file")
            self._baselines = {str(k): Baseline(float(v["p50_ms"]), float(v["p95_ms"]), int(v["samples"]),
                                                str(v.get("learned_at", "")))
                               for k, v in doc["baselines"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self._baselines = {}
            self.load_error = f"{path}: ignored, baselines are learned again: {exc}"
            log.warning("probe baselines %s", self.load_error)

    def get(self, instance: str) -> Baseline | None:
        """The instance's baseline, or None while it is still being learned."""
        return self._baselines.get(instance)

    def set(self, instance: str, baseline: Baseline) -> None:
        """Record a learned baseline and persist the file (read again first if another process changed it)."""
        self.refresh()
        self._baselines[instance] = baseline
        self.save()

    def forget(self, instance: str) -> bool:
        """Drop an instance's baseline (it is learned again), and persist; False when it had none."""
        self.refresh()
        if self._baselines.pop(instance, None) is None:
            return False
        self.save()
        return True

    def all(self) -> dict[str, Baseline]:
        """Every baseline by instance id (a copy)."""
        return dict(self._baselines)

    def save(self) -> None:
        """Write the file atomically; a failure is logged, the baselines stay in memory."""
        if self.path is None:
            return
        doc = {"version": _VERSION, "baselines": {k: asdict(v) for k, v in sorted(self._baselines.items())}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        except OSError as exc:
            log.warning("probe baselines: cannot write %s: %s", self.path, exc)
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            self._stamp = self._file_stamp()
        except OSError as exc:
            log.warning("probe baselines: cannot write %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
