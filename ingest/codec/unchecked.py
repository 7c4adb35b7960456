"""Traces the gateway wrote unvalidated (``Kind.TRACE_UNCHECKED``), validated where they are stored.

On the request path the gateway writes a trace's JSON straight from its recorder's values
(:meth:`router_core.decide.recorder.TraceRecorder.plain`): one orjson call instead of building two dozen
pydantic models per request and walking them again to encode them. The contract still holds for
what is stored, because the storing sink's ``prepare`` runs :func:`check_traces` first: each such
record is validated against :class:`schemas.trace.DecisionTrace` (its stored form: candidates
refer to their state by ``state_id``, and ``detail`` is the sampling flag) and goes on as a
``TRACE``, or is refused with pydantic's message and quarantined. A relay (a gateway worker's
sink) passes them through untouched; the store process checks them.

A batch of :data:`CONTRACT_FROM` traces or more is checked first on its Arrow columns
(:mod:`ingest.codec.contract`), without building Python objects; only a batch that fails that
check goes through pydantic, trace by trace, for each bad one's reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pydantic import ConfigDict, Field, ValidationError

from ingest.codec.contract import Contract, contract_for
from ingest.codec.to_arrow import parse_schema
from ingest.kinds import Kind
from ingest.record_sink import RecordBatch, Rejected
from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["CONTRACT_FROM", "Checked", "check_traces", "stored_form_error", "trace_contract"]

# Traces in a batch from which its Arrow columns are checked first. Preparing a batch for DuckDB
# (the check, then the Arrow table) took 28 µs a trace with pydantic and 6.4 with the columns at
# 1,000 traces, 46.5 and 39 at 32, 64 and 72 at 16 (`python -m bench store_check`): the columns'
# tests cost about 1.5 ms a batch whatever its size.
CONTRACT_FROM = 24


class _StoredCandidate(CandidateEval):
    """A candidate as stored: its state is a reference to a stored snapshot (validated with that snapshot)."""

    state_id: str | None = None
    state_age_s: float | None = Field(None, ge=0)
    state_stale: bool | None = None


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


@dataclass(frozen=True, slots=True)
class Checked:
    """What :func:`check_traces` found: the traces refused, and the batch's traces as Arrow when it read them.

    ``table`` holds every ``TRACE`` of the batch, in order, as :func:`ingest.codec.to_arrow.parse_payloads`
    would give them; None when the columns were not checked, or the batch held other traces too.
    """

    rejected: list[Rejected]
    table: pa.Table | None = None


def trace_contract() -> Contract | None:
    """The stored trace's contract on Arrow columns (None: the C decoder is not built)."""
    return contract_for(_StoredTrace, parse_schema(Kind.TRACE))


def check_traces(batch: RecordBatch) -> Checked:
    """Validate the batch's unchecked traces in place: the valid ones become ``TRACE``, the rest are returned."""
    unchecked = batch.payloads.pop(Kind.TRACE_UNCHECKED, None)
    if not unchecked:
        return Checked([])
    traces = batch.payloads.setdefault(Kind.TRACE, [])
    contract = trace_contract() if len(unchecked) >= CONTRACT_FROM else None
    table = None if contract is None else contract.checked(unchecked)
    if table is not None:  # every one meets the contract
        alone = not traces
        traces.extend(unchecked)
        return Checked([], table if alone else None)
    rejected: list[Rejected] = []
    for payload in unchecked:
        reason = stored_form_error(payload)
        if reason is None:
            traces.append(payload)
        else:
            rejected.append(Rejected(Kind.TRACE, payload, reason))
    if not traces:
        del batch.payloads[Kind.TRACE]
    return Checked(rejected)
