"""Where the gateway's traces go and come back from: the :class:`TraceHooks` protocol.

Storage is not this room's business: ``app/run/gateway_app.py`` plugs the ingest emitter and store in
(``StoreHooks``). Every member below is one the gateway calls; none is looked up by name. A member
whose feature the hooks do not have answers as its docstring says "with nothing to do", and the
gateway then leaves that feature out (no ``storage`` in ``/health``, no plain values, ...).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.policy_record import PolicyRecord
from schemas.records import RouterEvent
from schemas.trace import DecisionTrace

__all__ = ["TraceHooks"]


class TraceHooks(Protocol):
    """Where traces go and come back from (implemented outside router_core)."""

    def emit(self, trace: DecisionTrace) -> bool:
        """Hand a trace over; waits only when the spool is full under the `block` policy.

        Called with a validated trace when :attr:`takes_plain` is False (else :meth:`emit_plain` is).
        """
        ...

    @property
    def takes_plain(self) -> bool:
        """Whether traces come as plain values (:meth:`emit_plain`) rather than validated (:meth:`emit`).

        True for a store that validates what it stores (the ingest pipeline does, and quarantines
        what fails): the gateway then builds no trace model on the request path. False (hooks with
        nothing to do): each trace is validated into a ``DecisionTrace`` and handed to :meth:`emit`,
        its candidates and steps validated ahead while the instance works on the request.
        Read at each trace; a plain class attribute satisfies it.
        """
        ...

    def emit_plain(self, values: dict[str, Any]) -> bool:
        """Hand a trace over as :meth:`router_core.decide.recorder.TraceRecorder.plain` gives it, unvalidated.

        Called only when :attr:`takes_plain` is True, instead of :meth:`emit`; True when queued,
        False when refused at once (quarantined as oversized, say). Hooks with nothing to do
        (``takes_plain`` False) are never called and return False.
        """
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
        """Whether the store holds a verdict on ``request_id``, or one is on its way to it; may block (worker thread).

        Asked before a verdict is accepted, once the gateway's own claims (which start again after a
        restart) know none: a second verdict on a request judged before the restart is then a 409
        rather than accepted and quarantined by the store. On its way counts: a verdict not written
        yet (in the hooks' pipeline or the store's) is answered for without forcing a write. May
        raise when the store cannot answer (the gateway then accepts the verdict: the store keeps
        the first one only anyway).
        """
        ...

    def record_snapshots(self, snapshots: list[InstanceSnapshot]) -> None:
        """Hand over a scrape round's instance snapshots, the way ``emit`` hands over a trace.

        Called before any trace refers to them: the traces then point at stored snapshots, and
        the snapshots are serialised here rather than on a request's path. Like ``emit`` it only
        waits when the spool is full under ``storage.spool.full_policy: block``.
        """
        ...

    def record_policy(self, record: PolicyRecord) -> None:
        """Hand over an effective policy, once per hash, the first time a decision names it.

        The traces carry only its hash (``policy_hash``); a replay reads the document stored under
        it. Hooks with nothing to do return at once (the policy is then not stored).
        """
        ...

    def record_event(self, event: RouterEvent) -> None:
        """Hand over a router event: a breaker's or the router mode's transition.

        Called on the loop as the transition happens, so it must not block (queue, as ``emit``
        does); the gateway also keeps the breakers' recent events in memory for
        ``/v1/router/state``. Hooks with nothing to do return at once (the event is not stored).
        """
        ...

    def storage_state(self) -> dict[str, Any] | None:
        """Where the traces stand (the spool's state, the records waiting), shown as ``storage`` in ``/health``.

        Hooks with nothing to tell return None, and ``/health`` has no ``storage``.
        """
        ...

    def health(self) -> str | None | Awaitable[str | None]:
        """Why ``/health`` is 503 for storage (spool unavailable, store failing or unreachable), or None.

        Plain or ``async`` (the serving hooks ask the store process over loopback): an awaited
        check is bounded by ``ops_routes.HOOKS_HEALTH_TIMEOUT_S``, and one that raises or does not
        answer in time is itself a reason. Hooks with nothing to watch return None.
        """
        ...
