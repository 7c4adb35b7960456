"""Traces the gateway wrote unvalidated (``Kind.TRACE_UNCHECKED``), validated where they are stored.

On the request path the gateway writes a trace's JSON straight from its recorder's values
(:meth:`router_core.recorder.TraceRecorder.plain`): one orjson call instead of building two dozen
pydantic models per request and walking them again to encode them. The contract still holds for
what is stored, because the storing sink's ``prepare`` runs :func:`check_traces` first: each such
record is validated against :class:`schemas.trace.DecisionTrace` (its stored form: candidates
refer to their state by ``state_id``, and ``detail`` is the sampling flag) and goes on as a
``TRACE``, or is refused with pydantic's message and quarantined. A relay (a gateway worker's
sink) passes them through untouched; the store process checks them.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from ingest.kinds import Kind
from ingest.record_sink import RecordBatch, Rejected
from schemas.trace import DecisionTrace

__all__ = ["check_traces", "stored_form_error"]


def stored_form_error(payload: bytes) -> str | None:
    """Why ``payload`` (a trace in its stored form) is not a valid ``DecisionTrace``; None when it is."""
    try:
        body: Any = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        return f"not JSON: {exc}"
    if not isinstance(body, dict):
        return "not a JSON object"
    body.pop("detail", None)
    candidates = body.get("candidates")
    if isinstance(candidates, list):
        for cand in candidates:
            if isinstance(cand, dict):
                cand.pop("state_id", None)  # a reference to a stored snapshot, validated with that snapshot
    try:
        DecisionTrace.model_validate(body)
    except ValidationError as exc:
        return f"invalid trace: {exc}"
    return None


def check_traces(batch: RecordBatch) -> list[Rejected]:
    """Validate the batch's unchecked traces in place: the valid ones become ``TRACE``, the rest are returned."""
    unchecked = batch.payloads.pop(Kind.TRACE_UNCHECKED, None)
    if not unchecked:
        return []
    rejected: list[Rejected] = []
    traces = batch.payloads.setdefault(Kind.TRACE, [])
    for payload in unchecked:
        reason = stored_form_error(payload)
        if reason is None:
            traces.append(payload)
        else:
            rejected.append(Rejected(Kind.TRACE, payload, reason))
    if not traces:
        del batch.payloads[Kind.TRACE]
    return rejected
