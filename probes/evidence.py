"""Which failed probe results say something about what their kind judges.

A semantic verdict judges the fidelity of an answer, a latency verdict its speed against the
learned baseline. An instance that gives no answer (it refuses the connection, times out, breaks
it, answers an HTTP error such as a 5xx) or no usable one says nothing about either: that is an
availability failure, which the syntax probe (the instance's health check: a 200 with a valid
body) and the router's breaker report. Only a successful answer with low similarity is semantic
drift (``error_class`` ``drift``), and only a measured latency off its baseline or creeping up is
slowness (``off_baseline``, ``trend``). A result without an ``error_class`` is taken at its word.
"""

from __future__ import annotations

from schemas.common import ProbeKind, ProbeVerdict
from schemas.probe import ProbeResult

__all__ = ["JUDGED_BY", "is_evidence"]

# The error classes a kind's own judgement gives; a kind not listed (syntax) is judged by every failure.
JUDGED_BY: dict[ProbeKind, frozenset[str]] = {
    ProbeKind.SEMANTIC: frozenset({"drift"}),
    ProbeKind.LATENCY: frozenset({"off_baseline", "trend"}),
}


def is_evidence(result: ProbeResult) -> bool:
    """True when ``result`` bears on what its kind judges: it passed, or it failed that judgement.

    False for a semantic or latency result that failed because the instance gave no usable
    answer (``connect``, ``timeout``, ``http_status``, ...) or the prober could not judge one
    (``unavailable``, ``internal``).
    """
    own = JUDGED_BY.get(result.kind)
    if own is None or result.verdict is ProbeVerdict.OK or result.error_class is None:
        return True
    return result.error_class in own
