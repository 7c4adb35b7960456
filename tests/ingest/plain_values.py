"""A validated trace as the plain values a gateway's recorder hands to storage (``TraceRecorder.plain``)."""

from __future__ import annotations

from typing import Any

from schemas.trace import DecisionTrace


def plain_of(trace: DecisionTrace) -> dict[str, Any]:
    """Every field in order; the nested candidates, steps and weights as dicts, the rest as they are."""
    values = dict(trace.__dict__)
    for key in ("candidates", "decision_trace", "score_weights"):
        values[key] = [dict(item.__dict__) for item in values[key]]
    return values
