"""What forwarding one request gave back: every attempt made, and the answer of the instance that gave one.

:class:`~router_core.gateway.forward.Forwarder` returns it; the recorder turns its attempts into
trace steps and :mod:`router_core.gateway.stages.respond` relays its answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from router_core.gateway.http1 import UpstreamResponse
from router_core.resilience.fallbacks import Passed
from router_core.state.inflight import Ticket
from schemas.fleet import InstanceSpec
from schemas.trace import Attempt

__all__ = ["Forwarded"]


@dataclass(slots=True)
class Forwarded:
    """Every attempt made, and what the upstream that answered gave back (None when every attempt failed).

    Attributes:
        body: The whole body (non-stream answers and error statuses), in the upstream's coding.
        first_chunk: A 200 stream's first chunk; the rest is still in ``response``.
        first_byte_at: When that chunk arrived (the forwarder's clock), for TTFT.
        open_stream: A 200 stream's in-flight ticket: the caller ends it when the relay ends.
        passed: The instances not sent to in ranked order: refused by a breaker, or a half-open trial put first.
        retry_after_s: Rate limited: every attempt was answered 429, or every instance was refused while
            held out after one; the soonest of their holds, in seconds (None: not rate limited).
    """

    attempts: list[Attempt]
    spec: InstanceSpec | None = None
    response: UpstreamResponse | None = None
    body: bytes = b""
    last_error: str | None = None
    first_chunk: bytes = b""
    first_byte_at: float | None = None
    open_stream: Ticket | None = None
    passed: list[Passed] = field(default_factory=list)
    retry_after_s: float | None = None

    @property
    def answered(self) -> InstanceSpec | None:
        """The instance whose answer the client gets (None: none answered)."""
        return None if self.response is None else self.spec

    def failure(self) -> str:
        """Why no instance answered: every instance refused by its breaker, else the last attempt's error."""
        refused = [p for p in self.passed if p.refused]
        if not self.attempts and self.last_error is None and refused:
            models = ", ".join(dict.fromkeys(p.model for p in refused))
            return f"every instance of {models} refused by its breaker: {', '.join(p.why for p in refused)}"
        why = f"last error: {self.last_error or 'none recorded'}"
        return why + (f"; refused by its breaker: {', '.join(p.why for p in refused)}" if refused else "")
