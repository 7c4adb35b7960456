"""``?unset=`` on the store's read routes over real HTTP: the names comma-separated or repeated, refusals named.

The routes share :class:`schemas.queries.TraceFilter`; before ``unset`` a route either refused
the parameter (``/v1/traces``' model ignores unknown ones: it listed every trace) or had no way to ask
for the traces without a model.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest

from ingest.duckdb.store import DuckDBTraceStore
from ingest.http_api.openapi import STORE_OPERATIONS
from schemas.openapi import openapi_document
from schemas.queries import TraceFilter
from tests.ingest.test_unset_filter import END, T0, TRACES, Clock, selected, served

WINDOW = f"start={quote(T0.isoformat())}&end={quote(END.isoformat())}"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("unset-http")
    store = DuckDBTraceStore(root / "t.duckdb", clock=Clock(T0 + timedelta(days=1)))  # sealed: the rollup is there
    assert store.write_records(TRACES).rejected == []
    try:
        with served(store, root / "spool") as base:
            yield base
    finally:
        store.close()


def get(url: str, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url + path, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def want(*names: str) -> list[str]:
    return [t.request_id for t in selected(TraceFilter(unset=list(names)))]


def test_traces_without_a_model(url: str) -> None:
    status, page = get(url, "/v1/traces?unset=model&limit=1000")
    assert status == 200 and [s["request_id"] for s in page["items"]] == want("model")
    assert page["items"] and all(s["selected_model"] is None for s in page["items"])
    assert len(page["items"]) < len(TRACES)


@pytest.mark.parametrize("query", ["unset=model,instance", "unset=instance&unset=model", "unset=model%2C%20instance"])
def test_several_names_comma_separated_or_repeated(url: str, query: str) -> None:
    status, page = get(url, f"/v1/traces?{query}&limit=1000")
    assert status == 200 and [s["request_id"] for s in page["items"]] == want("model", "instance")


def test_the_analytics_routes_take_it_too(url: str) -> None:
    n = len(want("rule"))
    status, body = get(url, f"/v1/analytics/window?{WINDOW}&unset=rule")
    assert status == 200 and body["window"]["requests"] == n
    status, body = get(url, f"/v1/analytics/buckets?{WINDOW}&bucket=1h&unset=rule")
    assert status == 200 and sum(b["requests"] for b in body["buckets"]) == n
    status, body = get(url, f"/v1/analytics/traffic?{WINDOW}&unset=rule")
    assert status == 200 and sum(e["requests"] for e in body["edges"]) == n
    assert {e["rule"] for e in body["edges"]} == {None}


@pytest.mark.parametrize(("query", "says"), [
    ("unset=colour", "Input should be 'rule', 'model' or 'instance'"),
    ("unset=model&model=m", "unset names model, which the filter also gives a value"),
])
@pytest.mark.parametrize("route", ["/v1/traces", "/v1/analytics/traffic"])
def test_a_bad_unset_is_a_400_naming_it(url: str, route: str, query: str, says: str) -> None:
    status, body = get(url, f"{route}?{query}")
    assert status == 400 and body["error"]["code"] == "invalid_parameter", body
    assert body["error"]["param"] == "unset" and says in body["error"]["message"]


def test_the_openapi_document_lists_it() -> None:
    doc = openapi_document("store", "1", STORE_OPERATIONS)
    (param,) = [p for p in doc["paths"]["/v1/traces"]["get"]["parameters"] if p["name"] == "unset"]
    assert not param["required"] and "comma-separated" in param["description"]
    array = next(s for s in param["schema"]["anyOf"] if s.get("type") == "array")
    assert array["items"]["enum"] == ["rule", "model", "instance"]
