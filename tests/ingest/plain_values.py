"""A validated trace as the plain values a gateway's recorder hands to storage (``TraceRecorder.plain``)."""

from __future__ import annotations

from bench.synthetic import plain_of

__all__ = ["plain_of"]
