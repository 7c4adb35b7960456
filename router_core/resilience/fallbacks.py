"""Typed fallbacks: an attempt's error class, and the next target its class's chain names.

The forwarder (:mod:`router_core.gateway.forward`) owns the loop; this module holds its pure parts:
:func:`classify` maps a failed attempt to a ``resilience.fallbacks`` class, :func:`next_target`
finds the first instance a chain's steps allow that the breakers admit, and :class:`Abort` lets a
breaker that opens cut an outstanding attempt short (it fails over at once instead of waiting).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence

from router_core.resilience.breakers import Admission, BreakerBoard
from schemas.common import AttemptStatus
from schemas.config.resilience import ErrorClass, NextTarget
from schemas.fleet import InstanceSpec

__all__ = ["Abort", "classify", "next_target"]

# Lower-cased fragments of the 400 bodies engines answer with (vLLM, OpenAI, TGI).
_OVERFLOW = (b"context length", b"context_length", b"maximum context", b"too many tokens", b"prompt is too long")
_FILTERED = (b"content_filter", b"content filter", b"content_policy", b"content management policy")


class Abort:
    """Ends one attempt's timeout now: its instance's breaker opened, or its hedge's twin answered first.

    ``reason`` is what the attempt records as its error class (``breaker_open`` or ``hedged_out``).
    """

    __slots__ = ("cm", "fired", "reason")

    def __init__(self) -> None:
        self.cm: asyncio.Timeout | None = None
        self.fired = False
        self.reason = "breaker_open"

    def fire(self, reason: str = "breaker_open") -> None:
        """Make the attempt time out at once (no-op before it started or after it ended)."""
        cm = self.cm
        if cm is None or cm.expired() or self.fired:
            return
        try:
            cm.reschedule(asyncio.get_running_loop().time())
        except RuntimeError:  # its timeout has been left: the attempt has ended
            return
        self.fired, self.reason = True, reason


def classify(status: AttemptStatus, http_status: int | None, stream: bool, body: bytes = b"") -> ErrorClass | None:
    """The error class of an attempt (None: it succeeded, or its error status is a plain answer)."""
    if status is AttemptStatus.CONNECT_ERROR:
        return "connect"
    if status is AttemptStatus.TIMEOUT:
        return "first_byte" if stream else "timeout"
    if status is AttemptStatus.OK or http_status is None:
        return None
    if http_status == 429:
        return "http_429"
    if http_status >= 500:
        return "http_5xx"
    if http_status in (400, 413, 422) and body:
        text = body[:4096].lower()
        if any(f in text for f in _OVERFLOW):
            return "context_overflow"
        if any(f in text for f in _FILTERED):
            return "content_filter"
    return None


def _allowed(step: NextTarget, targets: Sequence[InstanceSpec], tried: set[str],
             last: InstanceSpec | None) -> Iterator[InstanceSpec]:
    if last is None or step == "any":
        yield from (t for t in targets if t.id not in tried)
    elif step == "same_instance":
        yield last
    elif step == "same_model":
        yield from (t for t in targets if t.id not in tried and t.model == last.model)
    else:  # other_model
        yield from (t for t in targets if t.id not in tried and t.model != last.model)


def next_target(targets: Sequence[InstanceSpec], tried: set[str], last: InstanceSpec | None,
                steps: Sequence[NextTarget], board: BreakerBoard | None,
                abort: Callable[[], None] | None = None) -> tuple[InstanceSpec | None, Admission | None]:
    """The first instance the steps allow (in ranked order) that the breakers let through.

    Instances a breaker refuses are skipped without an attempt (their breaker opened after the
    decision); a first attempt goes to a half-open instance when one is among ``targets``.
    Returns ``(None, None)`` when no step finds one.
    """
    if last is None and board is not None:  # a half-open breaker's trial goes first (see BreakerBoard.wants_trial)
        for spec in targets:
            if board.wants_trial(spec) and (adm := board.admit(spec, abort)) is not None:
                return spec, adm
    for step in steps:
        for spec in _allowed(step, targets, tried, last):
            if board is None:
                return spec, None
            adm = board.admit(spec, abort)
            if adm is not None:
                return spec, adm
    return None, None
