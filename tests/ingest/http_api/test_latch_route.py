"""``GET /v1/analytics/latches`` over real HTTP, and the client that reads it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ingest.duckdb.store import DuckDBTraceStore
from ingest.http_api.client import HttpTraceStore
from ingest.pipeline.emitter import TraceEmitter
from schemas.fleet import InstanceSnapshot, LatchState
from tests.ingest.http_api.test_routes import Call, serve

T0 = datetime(2026, 3, 1, 13, 0, tzinfo=UTC)


def snaps() -> list[InstanceSnapshot]:
    """c-a at 10/s for 5 minutes, its kv-cache latch out from 60 s to 80 s and from 200 s on."""
    out = []
    for i in range(3000):
        s = i / 10
        latch = LatchState(constraint="kv-cache", out=60 <= s < 80 or s >= 200, value=0.9)
        out.append(InstanceSnapshot(instance="c-a", model="m", scraped_at=T0 + timedelta(seconds=s), latches=[latch]))
    return out


def test_the_route_and_the_client(tmp_path: Path) -> None:
    start, end = T0.isoformat(), (T0 + timedelta(minutes=5)).isoformat()

    async def check(call: Call, em: TraceEmitter, store: DuckDBTraceStore) -> None:
        store.write_records(snaps())
        q = f"start={start}&end={end}&instance=c-a".replace("+", "%2B")
        status, body = await call("GET", f"/v1/analytics/latches?{q}")
        assert status == 200 and body["snapshots"] == 3000 and not body["truncated"]
        assert [(i["start"], i["end"]) for i in body["intervals"]] == [
            ("2026-03-01T13:01:00Z", "2026-03-01T13:01:20Z"), ("2026-03-01T13:03:20Z", None)]
        status, body = await call("GET", f"/v1/analytics/latches?{q}&limit=1")
        assert status == 200 and body["truncated"] and len(body["intervals"]) == 1
        status, body = await call("GET", "/v1/analytics/latches?start=yesterday")
        assert status == 400 and body["error"]["param"] == "start"

    serve(tmp_path, check)


def test_the_client_reads_none_from_a_server_without_the_route() -> None:
    from tests.app import stub_trace_api as stub

    with stub.StubTraceApi([]) as api:
        assert HttpTraceStore(api.url).latch_intervals(T0, T0 + timedelta(hours=1)) is None
