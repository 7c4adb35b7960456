"""Results of the synthetic probes that check every instance, and the verdicts kept from them.

A :class:`ProbeResult` is one probe run (stored through the trace pipeline, ``GET /v1/probes``);
a :class:`ProbeStatus` is the hysteresis verdict of one kind on one instance, carried in the
instance's live state (``InstanceSnapshot.probes``) so the router's ``probe`` filter and every
trace see it.
"""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel, ProbeKind, ProbeVerdict, UtcTime

__all__ = ["ProbeResult", "ProbeStatus"]


class ProbeResult(ContractModel):
    """One probe run against one instance.

    ``value`` is what was measured (latency: the window's p95 in ms; semantic: the lowest cosine
    similarity of the round; syntax: 1.0 when valid, 0.0 when not) and ``threshold`` the bound it
    was judged against; ``reason`` says in words what was wrong (empty when ``ok``).
    """

    probe_id: str = Field(min_length=1)
    ts: UtcTime
    instance: str
    model: str
    kind: ProbeKind
    verdict: ProbeVerdict
    value: float | None = Field(None, description="Measured value: latency ms, cosine, 1/0 for syntax.")
    threshold: float | None = None
    baseline: float | None = Field(None, description="Latency: the learned baseline p95 (ms).")
    latency_ms: float | None = Field(None, ge=0, description="Wall time of the probe request(s).")
    reason: str = Field("", max_length=2000)
    error_class: str | None = Field(None, description="e.g. timeout, connect, http_status, schema, garbled.")
    reference: str | None = Field(None, description="Semantic: the reference that scored lowest.")


class ProbeStatus(ContractModel):
    """The hysteresis verdict of one probe kind on one instance, and since when it holds."""

    kind: ProbeKind
    verdict: ProbeVerdict
    since: UtcTime
    value: float | None = None
    threshold: float | None = None
    reason: str = Field("", max_length=500)
    flaps: int = Field(0, ge=0, description="Verdict changes counted so far (flapping shows here).")
