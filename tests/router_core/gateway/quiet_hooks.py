"""The gateway's trace hooks with nothing to do: the base of the test doubles used as ``hooks``.

Each member answers what :class:`router_core.gateway.TraceHooks` says hooks with nothing to do
answer (no plain values, no storage state, no health reason, events and policies dropped), so a
double overrides only what its test watches.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.policy_record import PolicyRecord
from schemas.records import RouterEvent
from schemas.trace import DecisionTrace


class QuietHooks:
    """Every :class:`TraceHooks` member, doing nothing: traces dropped, nothing found, nothing to tell."""

    takes_plain = False

    def emit(self, trace: DecisionTrace) -> bool:
        return True

    def emit_plain(self, values: dict[str, Any]) -> bool:
        return False  # never called: takes_plain is False

    def lookup(self, request_id: str) -> DecisionTrace | None:
        return None

    async def lookup_elsewhere(self, request_id: str) -> DecisionTrace | None:
        return None  # one process: nowhere else to look

    def record_feedback(self, feedback: Feedback) -> None:
        pass

    def has_stored_verdict(self, request_id: str) -> bool:
        return False

    def record_snapshots(self, snapshots: list[InstanceSnapshot]) -> None:
        pass

    def record_policy(self, record: PolicyRecord) -> None:
        pass

    def record_event(self, event: RouterEvent) -> None:
        pass

    def storage_state(self) -> dict[str, Any] | None:
        return None

    def health(self) -> str | None | Awaitable[str | None]:
        return None  # a double may override it plain or async, as the serving hooks' is
