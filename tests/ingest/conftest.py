"""Fixtures of the ingest tests: seeded traces, the Elasticsearch contract server and a client for it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from bench.synthetic import TraceFactory
from tests.ingest.es_contract.server import ContractServer


@pytest.fixture
def factory() -> TraceFactory:
    return TraceFactory(seed=11, n_candidates=4, round_every=5)


@pytest.fixture
def es_server() -> Iterator[ContractServer]:
    with ContractServer() as server:
        yield server
    assert server.violations == [], "requests or answers outside the contract"


def es_client(url: str) -> Any:
    from elasticsearch import Elasticsearch

    # One node and scripted outages: do not let the transport sit the node out (the pipeline backs off).
    return Elasticsearch(url, request_timeout=10, max_retries=0, dead_node_backoff_factor=0.0)


def real_es_url() -> str | None:
    return os.environ.get("ROUTELENS_ES_URL") or None
