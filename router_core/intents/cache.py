"""The centroid cache next to the routes file: per-route embeddings and centroids, keyed by content hash.

``<routes file>.intents-cache.npz`` holds, per route, its example embeddings and centroids with the
hash of its examples (:func:`router_core.intents.routes.route_hash`) and, with an early exit, their
rows after the encoder's first layers, plus the calibration's
figures (thresholds and held-out rates) keyed by the whole route set's hash. A route whose hash
still matches is reused as stored, so
adding examples to one route re-embeds and re-clusters that route only.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["CacheEntry", "CentroidCache", "cache_path_for"]

Vectors = npt.NDArray[np.float32]


def cache_path_for(routes_path: str | Path) -> Path:
    """The cache file of a routes file: ``<routes>.intents-cache.npz`` beside it."""
    p = Path(routes_path)
    return p.with_name(p.name + ".intents-cache.npz")


@dataclass
class CacheEntry:
    """One route's cached state."""

    hash: str
    embeddings: Vectors
    centroids: Vectors
    early: Vectors | None = None  # the examples' rows after the encoder's first layers (an early exit's)


@dataclass
class CentroidCache:
    """Routes' cached entries and thresholds; :meth:`load` tolerates a missing or unreadable file."""

    model: str
    routes: dict[str, CacheEntry] = field(default_factory=dict)
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, model: str) -> CentroidCache:
        """Read ``path``; an absent, corrupt or other-model file gives an empty cache."""
        try:
            with np.load(path, allow_pickle=False) as z:
                index = json.loads(str(z["index"]))
                if index.get("model") != model:
                    return cls(model)
                routes = {name: CacheEntry(h, z[f"e{i}"].astype(np.float32), z[f"c{i}"].astype(np.float32),
                                           z[f"x{i}"].astype(np.float32) if f"x{i}" in z.files else None)
                          for i, (name, h) in enumerate(index["routes"])}
                figures = {str(k): {str(n): float(x) for n, x in v.items()}
                           for k, v in index.get("thresholds", {}).items() if isinstance(v, dict)}
                return cls(model, routes, figures)
        except (OSError, KeyError, ValueError, TypeError, AttributeError):
            return cls(model)

    def save(self, path: Path) -> None:
        """Write atomically (temporary file, then rename)."""
        index = {"model": self.model, "routes": [[n, e.hash] for n, e in self.routes.items()],
                 "thresholds": self.thresholds}
        arrays: dict[str, npt.NDArray[np.generic]] = {"index": np.asarray(json.dumps(index))}
        for i, entry in enumerate(self.routes.values()):
            arrays[f"e{i}"] = entry.embeddings
            arrays[f"c{i}"] = entry.centroids
            if entry.early is not None:
                arrays[f"x{i}"] = entry.early
        # a name of its own: the CLI's refit and a running gateway's may write the same cache at once
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp.npz")
        os.close(fd)
        tmp = Path(name)
        try:
            np.savez(tmp, **arrays)  # type: ignore[arg-type]
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)
