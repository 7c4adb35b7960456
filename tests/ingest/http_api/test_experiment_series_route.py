"""``GET /v1/analytics/experiment-series`` on a real server on 127.0.0.1, and ``HttpTraceStore.experiment_series``.

The store holds an experiment and requests forced onto each arm by header (errors at ten times the
price, a second's latency, a misroute verdict each): through the API the series are the DuckDB
store's own, bucket for bucket, forced requests left out, where each arm's ``aggregate`` counts them.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson
import pytest
from aiohttp import web

from ingest import DuckDBTraceStore, http_errors
from ingest.errors import SinkError
from ingest.http_api.client import HttpTraceStore, Unauthorized
from ingest.http_api.proxy import add_store_proxy
from ingest.pipeline.emitter import TraceEmitter
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.experiments.experiment_data import END, POLICY, T0, VERSION, experiment, forced
from tests.ingest.http_api.test_read_token import run_with_api
from tests.ingest.test_trace_store import served

PATH = "/v1/analytics/experiment-series"
N = 200
FORCED = {"a": 7, "b": 12}
WINDOW = {"start": T0.isoformat(), "end": END.isoformat()}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DuckDBTraceStore, str]]:
    path = tmp_path_factory.mktemp("series")
    store = DuckDBTraceStore(path / "exp.duckdb")
    traces, feedback = experiment(N, N)
    forced_traces, forced_feedback = forced(FORCED)
    store.write_records([*traces, *forced_traces])
    store.write_records([*feedback, *forced_feedback])
    try:
        with served(store, path / "spool") as url:
            yield store, url
    finally:
        store.close()


def _get(url: str, **params: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{url}{PATH}?{urlencode(params)}", timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def test_the_route_answers_the_store_s_series_forced_requests_left_out(api: tuple[DuckDBTraceStore, str]) -> None:
    store, url = api
    status, body = _get(url, a="a", b="b", bucket="5m", **WINDOW)
    assert status == 200 and (body["by"], body["a"], body["b"]) == ("arm", "a", "b")
    assert sum(b["requests"] for b in body["buckets_a"]) == N and sum(b["requests"] for b in body["buckets_b"]) == N
    assert sum(b["errors"] for b in body["buckets_a"]) == N // 20  # every forced request is an error: none in
    day = AggregateQuery(filter=TraceFilter(start=T0, end=END, experiment_arm="a"), bucket="5m")
    assert sum(b.requests for b in store.aggregate(day)) == N + FORCED["a"]  # what the page's fallback showed

    client = HttpTraceStore(url, timeout_s=30)
    narrowed = TraceFilter(start=T0 + timedelta(minutes=7), end=END, outcome="ok", min_latency_ms=200.0)
    for by, a, b in (("arm", "a", "b"), ("version", VERSION["a"], VERSION["b"]), ("policy", POLICY["a"], POLICY["b"]),
                     ("arm", "b", "nobody")):
        for query in (AggregateQuery(filter=TraceFilter(start=T0, end=END), bucket="5m"),
                      AggregateQuery(filter=narrowed, bucket="1m"),
                      AggregateQuery(filter=TraceFilter(start=T0, end=END, model="nowhere"), bucket="1h")):
            want = store.experiment_series(by, a, b, query)
            assert client.experiment_series(by, a, b, query) == want, (by, a, query)
    assert client.experiment_series("arm", "b", "nobody", AggregateQuery(filter=TraceFilter(
        start=T0, end=END)))["nobody"] == []


@pytest.mark.parametrize(("params", "param"), [
    ({"b": "b"}, "a"), ({"a": "a"}, "b"), ({"a": "", "b": "b"}, "a"), ({"a": "a", "b": "a"}, "b"),
    ({"a": "a", "b": "x" * 201}, "b"), ({"a": "a", "b": "b", "by": "model"}, "by"),
    ({"a": "a", "b": "b", "bucket": "2m"}, "bucket"), ({"a": "a", "b": "b", "outcome": "maybe"}, "outcome"),
    ({"a": "a", "b": "b", "fallback": "maybe"}, "fallback"), ({"a": "a", "b": "b", "min_latency_ms": "-1"},
                                                               "min_latency_ms"),
])
def test_a_bad_parameter_is_a_400_naming_it(api: tuple[DuckDBTraceStore, str], params: dict[str, str],
                                           param: str) -> None:
    status, body = _get(api[1], **WINDOW, **params)
    assert status == 400, body
    assert (body["error"]["type"], body["error"]["code"], body["error"]["param"]) == (
        "invalid_request_error", "invalid_parameter", param)


@pytest.mark.parametrize(("window", "param"), [
    ({"end": END.isoformat()}, "start"), ({"start": T0.isoformat()}, "end"),
    ({"start": "2026-01-01T00:00:00", "end": END.isoformat()}, "start"), ({"start": "noon", "end": "x"}, "start"),
    ({"start": END.isoformat(), "end": END.isoformat()}, "end"), ({"start": END.isoformat(), "end": T0.isoformat()},
                                                                  "end"),
])
def test_the_window_is_required_and_named_when_wrong(api: tuple[DuckDBTraceStore, str], window: dict[str, str],
                                                     param: str) -> None:
    status, body = _get(api[1], a="a", b="b", **window)
    assert status == 400 and body["error"]["param"] == param, body
    assert "<record>" not in body["error"]["message"]


def test_the_route_and_its_client_need_the_read_token(tmp_path: Path) -> None:
    traces, _ = experiment(10, 10)
    query = AggregateQuery(filter=TraceFilter(start=T0, end=END), bucket="1h")
    path = f"{PATH}?{urlencode({'a': 'a', 'b': 'b', **WINDOW})}"

    async def check(base: str, em: TraceEmitter) -> None:
        assert all(em.emit(t) for t in traces) and await asyncio.to_thread(em.flush, 10.0)
        proxy = web.Application()  # the gateway forwards the store's read routes, this one with them
        add_store_proxy(proxy, base, lambda _: None, read_token="read-t")
        runner = web.AppRunner(proxy)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        gateway = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        try:
            async with aiohttp.ClientSession() as session:
                for url in (base, gateway):
                    for auth in (None, "Bearer wrong", "Bearer intake-t"):
                        async with session.get(url + path, headers={"Authorization": auth} if auth else {}) as resp:
                            assert resp.status == 401, (url, auth)
                            assert orjson.loads(await resp.read())["error"]["code"] == "invalid_api_key"
                    async with session.get(url + path, headers={"Authorization": "Bearer read-t"}) as resp:
                        body = orjson.loads(await resp.read())
                        assert resp.status == 200, (url, body)
                        assert sum(b["requests"] for b in body["buckets_a"]) == 10
        finally:
            await runner.cleanup()
        got = await asyncio.to_thread(HttpTraceStore(base, token="read-t").experiment_series, "arm", "a", "b", query)
        assert {side: sum(b.requests for b in s) for side, s in got.items()} == {"a": 10, "b": 10}
        with pytest.raises(Unauthorized):
            await asyncio.to_thread(HttpTraceStore(base).experiment_series, "arm", "a", "b", query)

    run_with_api(tmp_path, "read-t", check)


def test_a_server_without_the_route_is_named_as_such() -> None:
    async def main() -> None:
        app = web.Application(middlewares=[http_errors])  # a store from before the route: 404 for it
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        client = HttpTraceStore(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}")  # type: ignore[union-attr]
        try:
            with pytest.raises(SinkError, match="does not serve GET /v1/analytics/experiment-series"):
                await asyncio.to_thread(client.experiment_series, "arm", "a", "b",
                                        AggregateQuery(filter=TraceFilter(start=T0, end=END)))
        finally:
            await runner.cleanup()

    asyncio.run(main())
