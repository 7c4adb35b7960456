"""A summary of a traffic run, for ``routelens sim traffic``: volume, errors, latency, accuracy, feedback.

"Misroute" means here what it means in the app and the store: a feedback verdict ``correct=false``
(``feedback_wrong``: the ones this run posted and the gateway accepted). An answer served by another
model than the one its case expects is counted apart, as ``off_target``: with a model that answers
that class well enough, it is no misroute.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sim.traffic import TrafficResult

__all__ = ["UNREACHABLE", "error_kind", "failure", "format_traffic", "is_judged_correct", "percentile", "summarise"]

UNREACHABLE = "no connection"  # the kind of an error where no connection to the gateway was made
_KINDS = {"APITimeoutError": "timeout"}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank) of ``values``, rounded to µs; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))], 3)


def error_kind(result: TrafficResult) -> str | None:
    """What went wrong with ``result`` in a few words (``HTTP 503``, ``no connection``, ``timeout``); None when ok."""
    if result.status == "ok":
        return None
    if result.http_status is not None:
        return f"HTTP {result.http_status}"
    name, _, rest = (result.error or "error").partition(":")  # send_chat writes "ErrorClass: message (Cause)"
    if name == "APIConnectionError":  # refused or no such host (httpx's ConnectError), or a connection cut short
        return UNREACHABLE if rest.endswith("(ConnectError)") else "connection dropped"
    return _KINDS.get(name, name)


def is_judged_correct(result: TrafficResult) -> bool:
    """The ``correct`` of the feedback posted on ``result``: its answer was graded correct (an error is not)."""
    return result.grade == "correct"


def summarise(results: Sequence[TrafficResult]) -> dict[str, Any]:
    """Figures of a run; no query text, only classes and counts.

    Returns:
        ``requests``, ``errors``, ``latency_ms`` (p50/p95/p99 of successes), ``accuracy`` (share of
        graded answers that were correct), ``off_target`` (answers served by another model than the
        case's expected one), ``feedback_accepted``, ``feedback_wrong`` (accepted verdicts
        ``correct=false``: the run's misroutes, as the app counts them), ``sessions``, ``by_class``,
        ``served_by`` and ``errors_by_kind`` (most first).
    """
    ok = [r for r in results if r.status == "ok"]
    graded = [r for r in ok if r.grade is not None]
    latencies = [r.latency_ms for r in ok]
    return {
        "requests": len(results),
        "errors": len(results) - len(ok),
        "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95),
                       "p99": percentile(latencies, 99)},
        "accuracy": round(sum(r.grade == "correct" for r in graded) / len(graded), 4) if graded else None,
        "off_target": sum(1 for r in ok if r.expected_model and r.model and r.model != r.expected_model),
        "feedback_accepted": sum(r.feedback_status == 202 for r in results),
        "feedback_wrong": sum(r.feedback_status == 202 and not is_judged_correct(r) for r in results),
        "sessions": len({r.session for r in results if r.session}),
        "by_class": dict(sorted(Counter(r.cls for r in results).items())),
        "served_by": dict(sorted(Counter(r.instance for r in ok if r.instance).items())),
        "errors_by_kind": dict(Counter(k for r in results if (k := error_kind(r)) is not None).most_common()),
    }


def _kinds(summary: dict[str, Any]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in summary["errors_by_kind"].items())


def failure(summary: dict[str, Any], gateway: str) -> str | None:
    """The one line saying a run failed as a whole (every request failed); None when any request succeeded.

    ``the gateway at URL could not be reached`` when no request got a connection, else how they failed.
    """
    n, errors = summary["requests"], summary["errors"]
    if n == 0 or errors < n:
        return None
    if summary["errors_by_kind"].keys() == {UNREACHABLE}:
        return f"the gateway at {gateway} could not be reached: none of the {n} requests got a connection"
    return f"all {n} requests to the gateway at {gateway} failed ({_kinds(summary)})"


def format_traffic(summary: dict[str, Any]) -> str:
    """Two lines for the terminal, and a third naming the kinds of errors when there were any."""
    lat = summary["latency_ms"]

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    acc = summary["accuracy"]
    return (f"traffic: {summary['requests']} requests, {summary['errors']} errors, {summary['sessions']} sessions, "
            f"latency p50/p95/p99 {ms(lat['p50'])}/{ms(lat['p95'])}/{ms(lat['p99'])} ms\n"
            f"  accuracy {'-' if acc is None else f'{acc:.1%}'}, not the expected model {summary['off_target']}, "
            f"feedback accepted {summary['feedback_accepted']} ({summary['feedback_wrong']} wrong: misroutes)"
            + (f"\n  errors: {_kinds(summary)}" if summary["errors"] else ""))
