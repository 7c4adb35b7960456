"""Plain spans to the OTLP protobuf body, in C; see ingest/otel/wire.py."""

from collections.abc import Mapping, Sequence
from typing import Any

def encode_request(resource: Mapping[str, Any], scope: tuple[str, str | None], spans: Sequence[Any], /) -> bytes: ...
def encode_traces(
    resource: Mapping[str, Any], scope: tuple[str, str | None], traces: list[Any], builder: Any, /,
) -> tuple[bytes, int, list[tuple[int, Exception]], int]: ...
