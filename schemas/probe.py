"""Results of the synthetic probes that check every instance."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from schemas.common import ContractModel, ProbeKind

__all__ = ["ProbeResult"]


class ProbeResult(ContractModel):
    """One probe run against one instance."""

    probe_id: str = Field(min_length=1)
    ts: datetime
    instance: str
    model: str
    kind: ProbeKind
    ok: bool
    value: float | None = Field(None, description="Measured value: latency ms, cosine, ...")
    threshold: float | None = None
    baseline: float | None = None
    latency_ms: float | None = Field(None, ge=0)
    reason: str = ""
    error_class: str | None = None
