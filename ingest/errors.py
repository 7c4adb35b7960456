"""Errors of the trace pipeline.

::

    RoutelensError                  (schemas/errors.py)
    └── SinkError                   a sink could not take a batch
        └── SinkUnavailable         retryable: the emitter keeps the batch and tries again
"""

from __future__ import annotations

from schemas.errors import RoutelensError

__all__ = ["SinkError", "SinkUnavailable"]


class SinkError(RoutelensError):
    """A sink failed to store or read traces."""


class SinkUnavailable(SinkError):
    """The sink is down or busy for now; the batch should be retried."""
