"""Typed fallbacks: an attempt's error class, and the next target its class's chain names.

The forwarder (:mod:`router_core.gateway.forward`) owns the loop; this module holds its pure parts:
:func:`classify` maps a failed attempt to a ``resilience.fallbacks`` class, :func:`next_target`
finds the first instance a chain's steps allow that the breakers admit (noting each instance it
passes over as a :class:`Passed`: a breaker refused it, or a half-open trial went ahead of it), and
:class:`Abort` lets a breaker that opens cut an outstanding attempt short (it fails over at once
instead of waiting).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from router_core.resilience.breaker import Breaker, BreakerState
from router_core.resilience.breakers import Admission, BreakerBoard
from schemas.common import AttemptStatus
from schemas.config.resilience import ErrorClass, NextTarget
from schemas.fleet import InstanceSpec

__all__ = ["Abort", "Passed", "classify", "next_target"]

# Lower-cased fragments of the 400 bodies engines answer with (vLLM, OpenAI, TGI).
_OVERFLOW = (b"context length", b"context_length", b"maximum context", b"too many tokens", b"prompt is too long")
_FILTERED = (b"content_filter", b"content filter", b"content_policy", b"content management policy")


@dataclass(frozen=True, slots=True)
class Passed:
    """An instance the forwarder did not send to in ranked order: its breaker refused it, or it took a trial first.

    Attributes:
        instance: The instance passed over (refused) or put first (a trial).
        model: Its model.
        scope: The scope of the breaker that refused it or wanted the trial (``instance``, ``model``, ``zone``).
        breaker: That breaker's name (the instance id, the model, the zone).
        state: The breaker's state then: ``open``, ``half-open, trial slots taken`` (refused) or ``half-open``.
        before: Attempts made before (the record's place among the attempts).
        ahead_of: A half-open trial: the instance ranked first, which it went ahead of (None: refused, not sent).
    """

    instance: str
    model: str
    scope: str
    breaker: str
    state: str
    before: int
    ahead_of: str | None = None

    @property
    def refused(self) -> bool:
        """A breaker refused the instance: nothing was sent to it."""
        return self.ahead_of is None

    @property
    def why(self) -> str:
        """``big-a open``, or ``big-a open (model breaker m)`` when another scope's breaker decided."""
        other = "" if self.scope == "instance" else f" ({self.scope} breaker {self.breaker})"
        return f"{self.instance} {self.state}{other}"


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
                abort: Callable[[], None] | None = None, passed: list[Passed] | None = None,
                before: int = 0) -> tuple[InstanceSpec | None, Admission | None]:
    """The first instance the steps allow (in ranked order) that the breakers let through.

    Instances a breaker refuses are skipped without an attempt (their breaker opened after the
    decision); a first attempt goes to a half-open instance when one is among ``targets``.
    Returns ``(None, None)`` when no step finds one. ``passed`` (when given) gets a record of each
    instance refused (once per instance) and of a trial put ahead of the first-ranked instance,
    ``before`` being the attempts made so far.
    """
    if last is None and board is not None:  # a half-open breaker's trial goes first (see BreakerBoard.wants_trial)
        for spec in targets:
            if board.wants_trial(spec) and (adm := board.admit(spec, abort)) is not None:
                if passed is not None and spec.id != targets[0].id:
                    _note(passed, spec, _trial_breaker(board, spec), "half-open", before, targets[0].id)
                return spec, adm
    for step in steps:
        for spec in _allowed(step, targets, tried, last):
            if board is None:
                return spec, None
            adm = board.admit(spec, abort)
            if adm is not None:
                return spec, adm
            if passed is not None and not any(p.instance == spec.id and p.refused for p in passed):
                b = board.blocking(spec)
                state = "open" if b is None or b.state is BreakerState.OPEN else "half-open, trial slots taken"
                _note(passed, spec, b, state, before, None)
    return None, None


def _trial_breaker(board: BreakerBoard, spec: InstanceSpec) -> Breaker | None:
    """The first half-open breaker of ``spec`` (instance, then model, then zone)."""
    for scope, name in (("instance", spec.id), ("model", spec.model), ("zone", spec.zone)):
        b = board.get(scope, name)
        if b is not None and b.state is BreakerState.HALF_OPEN:
            return b
    return None


def _note(passed: list[Passed], spec: InstanceSpec, b: Breaker | None, state: str, before: int,
          ahead_of: str | None) -> None:
    scope, name = ("instance", spec.id) if b is None else (b.scope, b.name)
    passed.append(Passed(spec.id, spec.model, scope, name, state, before, ahead_of))
