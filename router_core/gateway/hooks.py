"""Where the gateway's traces go and come back from: the :class:`TraceHooks` protocol.

Storage is not this room's business: ``app/run/gateway_app.py`` plugs the ingest emitter and store in.

Hooks may also have ``emit_plain(values: dict) -> bool``: the trace as
:meth:`router_core.decide.recorder.TraceRecorder.plain` gives it, unvalidated, for a store that validates
what it stores (the ingest pipeline does, and quarantines what fails). The gateway then builds no
trace model on the request path; hooks without it get :meth:`TraceHooks.emit` and a validated trace.
"""

from __future__ import annotations

from typing import Protocol

from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.trace import DecisionTrace

__all__ = ["TraceHooks"]


class TraceHooks(Protocol):
    """Where traces go and come back from (implemented outside router_core)."""

    def emit(self, trace: DecisionTrace) -> bool:
        """Hand a trace over; waits only when the spool is full under the `block` policy."""
        ...

    def lookup(self, request_id: str) -> DecisionTrace | None:
        """Find a trace; may block, so the gateway calls it in a worker thread."""
        ...

    async def lookup_elsewhere(self, request_id: str) -> DecisionTrace | None:
        """Where a trace is found that :meth:`lookup` missed, awaited by feedback only then; None: nowhere.

        ``serve --workers N`` asks the other workers for a trace they have not delivered yet
        (``app/run/siblings.py``); hooks of one process have nowhere else to look.
        """
        ...

    def record_feedback(self, feedback: Feedback) -> None:
        """Store one feedback record; may block (called in a worker thread)."""
        ...

    def has_stored_verdict(self, request_id: str) -> bool:
        """Whether the store holds a verdict on ``request_id``; may block (called in a worker thread).

        Asked before a verdict is accepted, once the gateway's own claims (which start again after a
        restart) know none: a second verdict on a request judged before the restart is then a 409
        rather than accepted and quarantined by the store. May raise when the store cannot answer
        (the gateway then accepts the verdict: the store keeps the first one only anyway).
        """
        ...

    def record_snapshots(self, snapshots: list[InstanceSnapshot]) -> None:
        """Hand over a scrape round's instance snapshots, the way ``emit`` hands over a trace.

        Called before any trace refers to them: the traces then point at stored snapshots, and
        the snapshots are serialised here rather than on a request's path. Like ``emit`` it only
        waits when the spool is full under ``storage.spool.full_policy: block``.
        """
        ...
