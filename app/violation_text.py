"""How a constraint violation reads as text: ``kv_cache_usage 93% > 85%``, the same in the terminal and on the page.

Pure functions over :class:`schemas.trace.Violation` returning ``str``; :mod:`app.explain` re-exports
them with the rest of a trace's text. A violation's numbers read in its metric's unit
(:func:`app.units.metric_unit`): ``kv_cache_usage 93% > 85%``, ``p95_latency_ms 1,240 ms > 800 ms``,
``queue 12 > 10``. A value the rule accepts, held out only by the latch, reads with the latch's release.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

from app.units import fmt, fmt_apart, metric_unit
from schemas.trace import Violation

__all__ = ["breach_op", "holds", "violation_short", "violation_text"]

_HOLDS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq, "!=": operator.ne,
}
_NEGATE = {"<=": ">", "<": ">=", ">=": "<", ">": "<=", "==": "!=", "!=": "=="}
_SIGN = {"<=": "≤", ">=": "≥"}
# The latch's release written by the constraint filter: "...; latched out until 0.8 holds for 5s".
_LATCH = re.compile(r"latched out until (?P<bound>[-+0-9.eE]+) holds for (?P<hold>[0-9.eE+]+)s")
_BROKE = re.compile(r" broke (?P<op><=|>=|<|>|==|!=) ")


def holds(op: str, value: float, threshold: float) -> bool:
    """Whether ``value op threshold`` holds: a constraint's rule (``kv_cache_usage <= 0.85``) is met."""
    return _HOLDS[op](value, threshold)


def breach_op(violation: Violation) -> str | None:
    """The relation the observed value had to its threshold, e.g. ``>`` for a broken ``<=`` rule.

    Filters write ``op`` as the rule that must hold (``kv_cache_usage <= 0.85``); older traces
    wrote the breaking relation itself. Whichever holds for the recorded value is the breach.
    None when the op is not a comparison (``in``, ``ok``) or there is no value.
    """
    if violation.value is None or violation.op not in _NEGATE:
        return None
    if _HOLDS[violation.op](violation.value, violation.threshold):
        return violation.op
    return _NEGATE[violation.op]


def _extra_reason(violation: Violation) -> str:
    """The part of the reason the numbers do not already say (``... broke <= 0.15; latched ...``)."""
    parts = [p.strip() for p in violation.reason.split(";")]
    kept = [p for p in parts if p and " broke " not in f" {p} " and " breaks " not in f" {p} "]
    return "; ".join(kept)


def _rule_op(violation: Violation) -> str:
    """The rule that must hold: the op after ``broke`` in the reason, else the recorded op."""
    broke = _BROKE.search(f" {violation.reason} ")
    return broke["op"] if broke else violation.op


def _latch(violation: Violation) -> tuple[float, float] | None:
    """The release ``(bound, hold_s)`` when the value satisfies the rule and only the latch keeps it out.

    The violation record carries the release in its reason (``latched out until 0.8 holds for 5s``);
    the rule is the op after ``broke`` there (older traces wrote the breaking relation as ``op``).
    """
    latch = _LATCH.search(violation.reason)
    if latch is None or violation.value is None or violation.op not in _NEGATE:
        return None
    if not _HOLDS[_rule_op(violation)](violation.value, violation.threshold):
        return None
    return float(latch["bound"]), float(latch["hold"])


def _latched(violation: Violation, release: tuple[float, float], since: bool) -> str:
    """``82% (latched out since 13:13:07 until ≤80% for 5 s)``: the value and what lets the instance back."""
    unit = metric_unit(violation.metric)
    unit = "n" if unit == "requests" else unit
    op = _rule_op(violation)
    when = f" since {violation.since.strftime('%H:%M:%S')}" if since and violation.since is not None else ""
    bound, hold = release
    return (f"{fmt(violation.value, unit)} (latched out{when} until {_SIGN.get(op, op)}{fmt(bound, unit)} "
            f"for {hold:g} s)")


def _breach(violation: Violation) -> str:
    """``93% > 85%``: the value, the broken relation and the threshold in the metric's unit (counts plain).

    A value that satisfies the rule (the instance is only held out by the latch) reads
    ``82% (latched out until ≤80% for 5 s)`` instead.
    """
    if (release := _latch(violation)) is not None:
        return _latched(violation, release, since=False)
    unit = metric_unit(violation.metric)
    value, threshold = fmt_apart(violation.value, violation.threshold, "n" if unit == "requests" else unit)
    return f"{value} {breach_op(violation)} {threshold}"


def _bound(violation: Violation) -> str:
    """The threshold alone in the metric's unit: ``15%``."""
    unit = metric_unit(violation.metric)
    return fmt(violation.threshold, "n" if unit == "requests" else unit)


def violation_text(violation: Violation) -> str:
    """Render a violation as ``constraint: metric value op threshold — reason`` without repetition.

    ``op`` is the breach (``kv_cache_usage 93% > 85%``); a value-less comparison reads
    ``error_rate has no data (needs <= 15%)``; a non-numeric rule (zone, probe) reads its reason.
    """
    extra = _extra_reason(violation)
    if violation.op not in _NEGATE:
        return f"{violation.constraint}: {violation.reason or violation.metric}"
    if violation.value is None:
        text = f"{violation.constraint}: {violation.metric} has no data (needs {violation.op} {_bound(violation)})"
    else:
        text = f"{violation.constraint}: {violation.metric} {_breach(violation)}"
        if _latch(violation) is not None:  # the breach already says what the latch waits for
            extra = "; ".join(p for p in extra.split("; ") if not _LATCH.search(p))
    return f"{text} — {extra}" if extra else text


def violation_short(violation: Violation) -> str:
    """A violation in a few words for a sentence: ``kv-cache 91% > 85% since 10:02:03``."""
    if violation.op not in _NEGATE:
        text = f"{violation.constraint} ({violation.reason or violation.metric})"
    elif violation.value is None:
        text = f"{violation.constraint} (no {violation.metric} data)"
    elif (release := _latch(violation)) is not None:
        return f"{violation.constraint} {_latched(violation, release, since=True)}"
    else:
        text = f"{violation.constraint} {_breach(violation)}"
    if violation.since is not None:
        text += f" since {violation.since.strftime('%H:%M:%S')}"
    return text
