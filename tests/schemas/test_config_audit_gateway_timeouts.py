"""The gateway's timeout descriptions name the settings that bound a stream, and they exist."""

from __future__ import annotations

import re

from schemas.config import GatewaySettings


def test_upstream_timeout_names_the_stream_timeouts_it_defers_to() -> None:
    # forward.py bounds a stream's attempt by first_byte_timeout_s (and idle/connect), not upstream_timeout_s;
    # the description said "the three timeouts below" while connect_timeout_s sits above it.
    text = GatewaySettings.model_fields["upstream_timeout_s"].description or ""
    named = set(re.findall(r"\b[a-z_]+_timeout_s\b", text))
    assert {"connect_timeout_s", "first_byte_timeout_s", "idle_timeout_s"} <= named
    assert named <= set(GatewaySettings.model_fields)
