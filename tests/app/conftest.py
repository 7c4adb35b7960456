"""Fixtures for the trace explorer tests: the sample trace, a live stub API, clean Streamlit caches."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import streamlit as st

from schemas import DecisionTrace
from tests.app import stub_trace_api as stub


@pytest.fixture
def trace() -> DecisionTrace:
    return stub.sample_trace()


@pytest.fixture
def stub_api(trace: DecisionTrace) -> Iterator[stub.StubTraceApi]:
    with stub.StubTraceApi([trace]) as api:
        yield api


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL nothing listens on (the port was just released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def clean_streamlit_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each page test picks its own source from the environment; caches are process-wide."""
    monkeypatch.delenv("ROUTELENS_DB", raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()
