"""The ``otel:`` section of ``routelens.yaml``: every decision exported as OpenTelemetry spans.

With ``enabled``, each gateway process sends its decision traces, as a span tree per request
(:mod:`ingest.otel`), over OTLP/HTTP (protobuf) to ``{endpoint}/v1/traces``: one more sink of
the trace pipeline beside the store, best-effort and off the request path. Unset fields fall
back to the standard variables: ``endpoint`` to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (taken as
the full URL) then ``OTEL_EXPORTER_OTLP_ENDPOINT`` (``/v1/traces`` appended), ``service_name`` to
``OTEL_SERVICE_NAME``; headers, compression and the CA certificate are read from the
``OTEL_EXPORTER_OTLP_{TRACES_,}{HEADERS,COMPRESSION,CERTIFICATE}`` variables, as the OpenTelemetry
SDK's exporter reads them.
"""

from __future__ import annotations

from pydantic import Field

from schemas.common import ContractModel

__all__ = ["OtelSettings"]


class OtelSettings(ContractModel):
    """OpenTelemetry export of the decision traces (off by default)."""

    enabled: bool = Field(False, description="Export every sampled decision as spans over OTLP/HTTP.")
    endpoint: str | None = Field(
        None, description="The OTLP/HTTP base URL (spans go to '{endpoint}/v1/traces'); default: "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then OTEL_EXPORTER_OTLP_ENDPOINT, then http://localhost:4318.")
    sample_ratio: float = Field(
        1.0, ge=0, le=1, description="Share of requests exported, decided on the trace id (the same requests "
        "as an OpenTelemetry TraceIdRatioBased sampler keeps); errors and fallbacks are always exported.")
    service_name: str | None = Field(None, min_length=1, description="The spans' service.name; default: "
                                     "OTEL_SERVICE_NAME, then 'routelens'.")
    timeout_s: float = Field(10.0, gt=0, description="One export request's time limit, retries included.")
    resource_attributes: dict[str, str] = Field(
        default={}, description="Extra resource attributes (e.g. openinference.project.name for Phoenix); "
        "OTEL_RESOURCE_ATTRIBUTES is read too.")
