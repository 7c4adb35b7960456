"""Records the trace pipeline stores besides decision traces: router events and quarantined input."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import ContractModel, UtcTime

__all__ = ["QuarantinedRecord", "RouterEvent"]


class RouterEvent(ContractModel):
    """Something the router did or saw that is not one request: a breaker opening, a reload, a latch."""

    event_id: str = Field(min_length=1, max_length=128)
    ts: UtcTime
    kind: str = Field(min_length=1, max_length=64, description="e.g. 'breaker', 'latch', 'config_reload'.")
    severity: Literal["info", "warning", "error"] = "info"
    instance: str | None = None
    model: str | None = None
    message: str = Field("", max_length=2000)
    value: float | None = None
    router_version: str | None = None


class QuarantinedRecord(ContractModel):
    """An input that failed validation or storage, kept with the reason instead of being dropped.

    ``raw`` is the record with every field the contract does not know replaced by ``"[redacted]"``
    (unknown fields could carry a query text); unparseable input keeps only its size and hash.
    """

    quarantine_id: str = Field(min_length=1, max_length=128)
    ts: UtcTime
    kind: str = Field(description="What the record was meant to be: trace, snapshot, probe, event, feedback.")
    source: str = Field(description="Where it came from: emit, intake, import:<file>, spool, sink.")
    reason: str
    request_id: str | None = None
    line: int | None = Field(None, ge=1, description="1-based line of a batch or file.")
    raw: str | None = None
    raw_bytes: int = Field(0, ge=0)
    raw_sha256: str | None = None
