"""Traffic through the official OpenAI client against a simulated instance standing in for the gateway."""

from __future__ import annotations

import asyncio
import socket

import pytest

from schemas.fleet import InstanceSpec
from sim.corpus import CLASSES, QUERIES
from sim.server import build_instance_app
from sim.traffic import TrafficResult, run_traffic


def _run(spec, profile, settings, serve, **kwargs) -> tuple[list[TrafficResult], list[TrafficResult]]:
    seen: list[TrafficResult] = []

    async def scenario():
        async with serve(build_instance_app(spec, profile, settings)) as url:
            return await run_traffic(url, on_result=seen.append, **kwargs)

    return asyncio.run(scenario()), seen


def test_traffic_sends_count_requests_and_reads_request_ids(spec, profile, fast, serve):
    results, seen = _run(spec, profile, fast, serve, rps=500, count=8, seed=5)
    assert [r.index for r in results] == list(range(8))
    assert sorted(seen, key=lambda r: r.index) == results
    assert all(r.status == "ok" and r.http_status == 200 and r.error is None for r in results)
    assert all(r.request_id is not None and r.request_id.startswith("chatcmpl-") for r in results)
    assert {r.cls for r in results} <= set(CLASSES)
    again, _ = _run(spec, profile, fast, serve, rps=500, count=8, seed=5)
    assert [(r.cls, r.query_hash) for r in again] == [(r.cls, r.query_hash) for r in results]


def test_traffic_reports_http_errors_without_query_text(profile, fast, serve):
    tiny = InstanceSpec(id="tiny", model="sim-model", url="http://127.0.0.1:0", context_window=16)
    results, _ = _run(tiny, profile, fast, serve, rps=500, count=12, seed=2)
    errors = [r for r in results if r.status == "error"]
    assert errors and all(r.http_status == 400 and "BadRequestError" in (r.error or "") for r in errors)
    assert not any(q.text in (r.error or "") for r in results for q in QUERIES)


def test_traffic_reports_connection_errors():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    results = asyncio.run(run_traffic(f"http://127.0.0.1:{port}", rps=500, count=2, timeout_s=5))
    assert [(r.status, r.http_status, r.request_id) for r in results] == [("error", None, None)] * 2
    assert all("APIConnectionError" in (r.error or "") for r in results)


def test_traffic_stops_at_duration_by_schedule(spec, profile, fast, serve):
    results, _ = _run(spec, profile, fast, serve, rps=50, duration_s=0.1, seed=1)
    assert len(results) == 5


def test_traffic_refuses_to_run_unbounded():
    with pytest.raises(ValueError, match="count or duration_s"):
        asyncio.run(run_traffic("http://127.0.0.1:9", rps=1))
