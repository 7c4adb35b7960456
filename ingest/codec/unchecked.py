"""Traces the gateway wrote unvalidated (``Kind.TRACE_UNCHECKED``), validated where they are stored.

On the request path the gateway writes a trace's JSON straight from its recorder's values
(:meth:`router_core.decide.recorder.TraceRecorder.plain`): one orjson call instead of building two dozen
pydantic models per request and walking them again to encode them. The contract still holds for
what is stored, because the storing sink's ``prepare`` runs :func:`check_traces` first: each such
record is validated against :class:`schemas.trace.DecisionTrace` (its stored form: candidates
refer to their state by ``state_id``, and ``detail`` is the sampling flag) and goes on as a
``TRACE``, or is refused with pydantic's message and quarantined. A relay (a gateway worker's
sink) passes them through untouched; the store process checks them.
"""

from __future__ import annotations

from pydantic import ConfigDict, ValidationError

from ingest.kinds import Kind
from ingest.record_sink import RecordBatch, Rejected
from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["check_traces", "stored_form_error"]


class _StoredCandidate(CandidateEval):
    """A candidate as stored: its state is a reference to a stored snapshot (validated with that snapshot)."""

    state_id: str | None = None


class _StoredTrace(DecisionTrace):
    """A trace as stored: its candidates refer to their states, and ``detail`` is the sampling flag."""

    model_config = ConfigDict(title="DecisionTrace")  # what a quarantine reason names

    candidates: list[_StoredCandidate] = []  # type: ignore[assignment]
    detail: bool = True


def stored_form_error(payload: bytes) -> str | None:
    """Why ``payload`` (a trace in its stored form) is not a valid ``DecisionTrace``; None when it is.

    One pass of pydantic-core over the JSON, against the contract with the stored form's two
    differences (``state_id``, ``detail``).
    """
    try:
        _StoredTrace.model_validate_json(payload)
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
