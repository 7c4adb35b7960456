"""Probes linked to traffic: an instance's bad windows, the requests it served in them, and its verdicts then.

For a window, where each request would have gone without the instance; for one trace, what the
probes said of its instance at that moment.

A *bad window* of an instance runs from its first probe result that is not ``ok`` to the first
result after which every probe kind that went bad has passed again (open while one has not). The
requests it served in the window are read from the store by selected instance and time; for each,
"without it" is the stored decision re-decided under its own stored policy with the instance
blocked (:func:`router_core.decide.replay.redecide`), the same machinery ``replay --verify`` uses,
so the answer is what the router would have done, not a guess from the ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.experiments.verify import PolicyShelf
from router_core import NotReplayable, UnknownModel, redecide
from schemas.common import ProbeVerdict
from schemas.probe import ProbeResult
from schemas.trace import DecisionTrace
from schemas.trace_inputs import BlockedInstance, DecisionInputs

__all__ = ["BadWindow", "bad_windows", "verdicts_at", "window_at", "without"]

# A trace's probe verdicts are the latest of each kind this long before it at most (probes run every 30 s).
VERDICT_LOOKBACK = timedelta(minutes=2)


@dataclass(frozen=True, slots=True)
class BadWindow:
    """When an instance's probes were not all ``ok``; ``end`` None: not over yet (as of the last result)."""

    instance: str
    start: datetime
    end: datetime | None
    worst: ProbeVerdict
    kinds: tuple[str, ...]
    reasons: tuple[str, ...]

    def covers(self, at: datetime) -> bool:
        """Whether ``at`` falls in the window."""
        return self.start <= at and (self.end is None or at < self.end)


def bad_windows(results: Sequence[ProbeResult], instance: str) -> list[BadWindow]:
    """The bad windows of ``instance`` in ``results`` (any order), oldest first."""
    out: list[BadWindow] = []
    open_kinds: set[str] = set()  # kinds whose latest result is not ok, while a window is open
    bad: list[ProbeResult] = []  # the open window's results that were not ok
    for r in sorted((r for r in results if r.instance == instance), key=lambda r: r.ts):
        if r.verdict is ProbeVerdict.OK:
            open_kinds.discard(r.kind.value)
            if bad and not open_kinds:
                out.append(_window(instance, bad, r.ts))
                bad = []
            continue
        open_kinds.add(r.kind.value)
        bad.append(r)
    if bad:
        out.append(_window(instance, bad, None))
    return out


def _window(instance: str, bad: list[ProbeResult], end: datetime | None) -> BadWindow:
    worst = ProbeVerdict.FAILED if any(r.verdict is ProbeVerdict.FAILED for r in bad) else ProbeVerdict.DEGRADED
    return BadWindow(instance, bad[0].ts, end, worst, tuple(dict.fromkeys(r.kind.value for r in bad)),
                     tuple(dict.fromkeys(r.reason for r in bad if r.reason)))


def window_at(windows: Sequence[BadWindow], at: datetime | None) -> BadWindow | None:
    """The window covering ``at`` (None: the latest), else the latest one that started before it."""
    if not windows:
        return None
    if at is None:
        return windows[-1]
    covering = [w for w in windows if w.covers(at)]
    if covering:
        return covering[-1]
    before = [w for w in windows if w.start <= at]
    return before[-1] if before else None


def verdicts_at(results: Sequence[ProbeResult], instance: str, at: datetime) -> list[ProbeResult]:
    """The latest result of each probe kind of ``instance`` at or before ``at`` (within :data:`VERDICT_LOOKBACK`)."""
    latest: dict[str, ProbeResult] = {}
    for r in results:
        if r.instance == instance and at - VERDICT_LOOKBACK <= r.ts <= at:
            seen = latest.get(r.kind.value)
            if seen is None or r.ts > seen.ts:
                latest[r.kind.value] = r
    return [latest[k] for k in sorted(latest)]


def without(trace: DecisionTrace, instance: str, shelf: PolicyShelf) -> str:
    """Where ``trace``'s request would have gone with ``instance`` out, under its own stored policy.

    Returns ``model / instance`` (with the fallback's reason when the router fell back), ``nowhere
    (reason)`` when it found no target, or why it cannot be said (its policy is not stored, its
    candidates' state was sampled out).
    """
    got = shelf.get(trace.policy_hash)
    if isinstance(got, str):
        return f"unknown: {got}"
    if not trace.candidates or any(c.state is None for c in trace.candidates):
        return "unknown: its candidates' state is not in the trace"
    policy, rules = got
    inputs = trace.inputs or DecisionInputs()
    out = BlockedInstance(instance=instance, scope="instance", state=2, reason="taken out to see where it would go")
    blocked = trace.model_copy(update={"inputs": inputs.model_copy(update={"blocked": [*inputs.blocked, out]})})
    try:
        decision = redecide(blocked, policy, rules)
    except NotReplayable as exc:
        return f"unknown: {exc}"
    except UnknownModel:
        return "unknown: its model is not in the policy's fleet"
    if not decision.targets:
        return f"nowhere ({decision.fallback_reason or 'no feasible instance'})"
    first = decision.targets[0]
    fell_back = "" if decision.fallback_reason is None else f" (fallback: {decision.fallback_reason})"
    return f"{first.model} / {first.id}{fell_back}"
