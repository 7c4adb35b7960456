"""Fixtures of the intake tests."""

from __future__ import annotations

import pytest

from ingest.codec import fast_decoder, to_arrow


@pytest.fixture(params=["c-decoder", "arrow-reader"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store parses its batches with the C decoder, or with Arrow's reader (as where the decoder is not built)."""
    if request.param == "c-decoder" and not fast_decoder.AVAILABLE:
        pytest.skip("the C decoder is not built")
    if request.param == "arrow-reader":
        monkeypatch.setattr(to_arrow, "_decoder", lambda kind: None)
    return str(request.param)
