"""Building the OTLP exporter sink from the ``otel:`` section and the standard environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry.sdk.resources import Resource

from ingest.otel.sink import OtlpSink
from ingest.otel.spans import SpanBuilder
from ingest.otel.transport import OtlpHttp
from schemas.config.otel import OtelSettings

__all__ = ["EXPORTER_NAME", "build_otel_sink", "traces_endpoint"]

EXPORTER_NAME = "otel"  # its name among the pipeline's sinks (the `sink` label of routelens_sink_*)
_DEFAULT_ENDPOINT = "http://localhost:4318"


def traces_endpoint(settings: OtelSettings, environ: Mapping[str, str]) -> str:
    """Where spans go: ``{endpoint}/v1/traces``; the variables when the config names none."""
    if settings.endpoint:
        return settings.endpoint.rstrip("/") + "/v1/traces"
    if full := environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return full
    return (environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or _DEFAULT_ENDPOINT).rstrip("/") + "/v1/traces"


def build_otel_sink(settings: OtelSettings, *, public_url: str | None = None, version: str | None = None,
                    environ: Mapping[str, str] | None = None) -> OtlpSink | None:
    """The exporter sink, or None when ``otel.enabled`` is off.

    Args:
        settings: The ``otel:`` section.
        public_url: The app's address (``app.public_url``): spans link to each request's page.
        version: ``service.version`` of the resource (the router's version).
        environ: The environment (``os.environ``): endpoint, service name, resource attributes.
    """
    if not settings.enabled:
        return None
    env = os.environ if environ is None else environ
    attrs: dict[str, str] = dict(settings.resource_attributes)
    name = settings.service_name or env.get("OTEL_SERVICE_NAME") or "routelens"
    attrs["service.name"] = name
    if version is not None:
        attrs.setdefault("service.version", version)
    resource = Resource.create(attrs)  # the SDK's defaults and OTEL_RESOURCE_ATTRIBUTES; ours win
    transport = OtlpHttp(traces_endpoint(settings, env), timeout_s=settings.timeout_s, environ=env)
    return OtlpSink(transport, SpanBuilder(public_url), dict(resource.attributes), sample_ratio=settings.sample_ratio)
