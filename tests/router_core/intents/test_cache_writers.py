"""Two writers of one routes file's cache (the CLI's refit, a running gateway's) each write a file of their own.

The temporary file had a fixed name: two saves within the same second could interleave in it and
leave a corrupt cache (found by the review of live intents).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from router_core.intents.cache import CacheEntry, CentroidCache


def _cache(seed: int) -> CentroidCache:
    rng = np.random.default_rng(seed)
    cache = CentroidCache(model="m")
    cache.routes["r"] = CacheEntry(hash=f"h{seed}", embeddings=rng.random((40, 8), dtype=np.float32),
                                   centroids=rng.random((2, 8), dtype=np.float32))
    return cache


def test_concurrent_saves_leave_one_whole_cache_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml.intents-cache.npz"
    caches = [_cache(i) for i in range(8)]
    threads = [threading.Thread(target=c.save, args=(path,)) for c in caches for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    loaded = CentroidCache.load(path, model="m")
    assert loaded.routes["r"].hash in {f"h{i}" for i in range(8)}  # whole: a corrupt file loads empty
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
