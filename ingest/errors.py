"""Errors of the trace pipeline.

::

    RoutelensError                  (schemas/errors.py)
    └── SinkError                   a sink could not take a batch, or the pipeline cannot go on
        ├── SinkUnavailable         retryable: the pipeline keeps the batch and tries again
        └── SpoolFull               the spool has no room (its limit, or the disk is full)
            └── SpoolUnavailable    the spool folder cannot be written at all
"""

from __future__ import annotations

from schemas.errors import RoutelensError

__all__ = ["SinkError", "SinkUnavailable", "SpoolDiskFull", "SpoolFull", "SpoolUnavailable"]


class SinkError(RoutelensError):
    """A sink failed to store or read records."""


class SinkUnavailable(SinkError):
    """The sink is down or busy for now; the batch should be retried."""


class SpoolFull(SinkError):
    """The spool cannot take a record now: its size limit is reached or the disk is full."""


class SpoolUnavailable(SpoolFull):
    """The spool folder cannot be created or written (permissions, read-only file system)."""


class SpoolDiskFull(SpoolUnavailable):
    """The disk under the spool is full: like an unwritable folder, an outage, not the spool's own limit.

    The records are held in memory (``storage.queue_size``) and the spool is tried again, so the
    request path never waits on a disk that nothing the pipeline does will free.
    """
